import type { DataSource } from "typeorm";
import { QueryFailedError } from "typeorm/error/QueryFailedError.js";
import { DomainError } from "./errors.js";

/** Whether the error is the driver's connection lost (reset, closed): what was sent may or may not have run. */
export function isConnectionLost(error: unknown): boolean {
  const driverError = error instanceof QueryFailedError ? error.driverError : error;
  return (driverError as { fatal?: unknown } | undefined)?.fatal === true;
}

/** Refused by a server that has all the connections it allows. */
const TOO_MANY_CONNECTIONS = "ER_CON_COUNT_ERROR";
/** Refused without being sent while MySQL is known to be silent (see silent-database.ts). */
const DATABASE_SILENT = "DATABASE_SILENT";

/**
 * Whether the error is the database out of reach: a connection that could not be made (refused, timed out, no such
 * host, the server full) or was lost. A transaction's statements before its COMMIT did not take effect (a COMMIT
 * lost is a CommitInDoubt); a statement run alone and lost as it ran may have.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  const driverError = error instanceof QueryFailedError ? error.driverError : error;
  const code = (driverError as { code?: unknown } | undefined)?.code;
  return isConnectionLost(error) || code === TOO_MANY_CONNECTIONS || code === DATABASE_SILENT;
}

/**
 * What to log of a failure of background work (a delivery round, a scheduled job): while the database is out of
 * reach, which that work retries on its own schedule, its message and code without a stack at each attempt.
 */
export function loggedFailure(error: unknown): unknown {
  if (!isDatabaseUnreachable(error)) return error;
  const { message, code } = error as { message?: string; code?: string };
  return { message, code };
}

/** The answer to a request that needed the database while it was out of reach: 503, try again. */
export function databaseUnavailable(): DomainError {
  return new DomainError("unavailable", "the service cannot reach its database; try again", {
    slug: "database-unavailable",
    headers: { "retry-after": "1" },
  });
}

/**
 * A MySQL transaction's connection was lost once its COMMIT was sent: it may have committed or not. Whoever gave
 * anything on its behalf (a counter reservation, an activation) must find out (endLostConnection, then look for
 * its rows) instead of undoing or redoing it; the request answers 503 `outcome-unknown`.
 */
export class CommitInDoubt extends DomainError {
  constructor(
    /** MySQL's id of the lost connection. */
    readonly connectionId: number,
    /** When its transaction started (Date.now()). */
    readonly startedAt: number,
  ) {
    super(
      "unavailable",
      "the database connection was lost during the write's COMMIT: it may or may not have taken effect",
      { slug: "outcome-unknown", headers: { "retry-after": "1" } },
    );
  }
}

const GONE_POLLS = 50;
const GONE_POLL_MS = 100;

/**
 * Ends the connection a CommitInDoubt lost and resolves once the server no longer runs it: its transaction has
 * then committed or rolled back for good, and nothing it was sent still in flight can run. Throws when the server
 * keeps it past five seconds. A server started since the transaction began (a restart: the loss's likely cause)
 * runs nothing of it, and its thread ids begin again, so that id may name another connection: nothing is ended.
 */
export async function endLostConnection(dataSource: DataSource, doubt: CommitInDoubt): Promise<void> {
  const [uptime] = (await dataSource.query("SHOW GLOBAL STATUS LIKE 'Uptime'")) as { Value: string }[];
  if (Number(uptime.Value) * 1000 < Date.now() - doubt.startedAt) return;
  const threadId = doubt.connectionId;
  await dataSource.query("KILL CONNECTION ?", [threadId]).catch(() => undefined);
  for (let poll = 0; poll < GONE_POLLS; poll++) {
    const rows = (await dataSource.query("SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?", [
      threadId,
    ])) as unknown[];
    if (rows.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, GONE_POLL_MS));
  }
  throw new Error(`MySQL connection ${threadId} is still running`);
}

/**
 * Rethrows `error`; when it is a CommitInDoubt, first waits for its transaction to settle (endLostConnection) and
 * then runs `forget`, which drops what caches hold of the rows it may have changed: read again before it settled,
 * they would keep the rows as they were before a COMMIT that then took effect.
 */
export async function forgettingOnDoubt(
  dataSource: DataSource,
  error: unknown,
  forget: () => Promise<void>,
): Promise<never> {
  if (error instanceof CommitInDoubt) {
    await endLostConnection(dataSource, error).catch(() => undefined);
    await forget();
  }
  throw error;
}
