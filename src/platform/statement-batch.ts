import type { DataSource, EntityManager } from "typeorm";
import {
  dialectOf,
  inTransaction,
  readCommittedAlready,
  retryingLockConflicts,
  threadIdOf,
  type WriteOptions,
} from "./database.js";
import { LOCK_WAIT_AS_CONFIGURED, lockWaitOf } from "./lock-waits.js";
import { CommitInDoubt, isConnectionLost } from "./lost-connections.js";

/** One SQL statement and its parameters, to run in a batch. */
export interface Statement {
  sql: string;
  parameters: unknown[];
}

/**
 * Runs statements in order in the manager's transaction and answers each one's result (rows of a SELECT, the
 * driver's write result otherwise). On MySQL they travel together, as one multi-statement query: one round trip
 * instead of one each (a batch of more than about 1 MiB of text, in several). Its values are still escaped by
 * the driver, statement by statement. SQLite runs them one after another. A statement that fails fails the
 * batch, and those after it do not run.
 */
export async function runBatch(manager: EntityManager, statements: Statement[]): Promise<unknown[]> {
  if (manager.connection.options.type !== "mysql") {
    const results: unknown[] = [];
    for (const statement of statements) results.push(await manager.query(statement.sql, statement.parameters));
    return results;
  }
  const results: unknown[] = [];
  for (const packet of packets(statements)) results.push(...(await sendTogether(manager, packet)));
  return results;
}

/**
 * A query's text is sent as one packet, and servers refuse one over `max_allowed_packet` (4 MiB by default on
 * MySQL 5.7): a batch larger than this goes in several round trips.
 */
const PACKET_BYTES = 1024 * 1024;

function packets(statements: Statement[]): Statement[][] {
  const all: Statement[][] = [];
  let current: Statement[] = [];
  let bytes = 0;
  for (const statement of statements) {
    const size = sizeOf(statement);
    if (current.length > 0 && bytes + size > PACKET_BYTES) {
      all.push(current);
      current = [];
      bytes = 0;
    }
    current.push(statement);
    bytes += size;
  }
  if (current.length > 0) all.push(current);
  return all;
}

/** About the bytes a statement takes in the query text: up to 3 a character in UTF-8, and a few for quotes. */
function sizeOf(statement: Statement): number {
  let size = statement.sql.length;
  for (const value of statement.parameters) {
    size += typeof value === "string" || Buffer.isBuffer(value) ? 3 * value.length + 2 : 24;
  }
  return size;
}

async function sendTogether(manager: EntityManager, statements: Statement[]): Promise<unknown[]> {
  if (statements.length === 1) return [await manager.query(statements[0].sql, statements[0].parameters)];
  return (await manager.query(
    statements.map((statement) => statement.sql).join(";\n"),
    statements.flatMap((statement) => statement.parameters),
  )) as unknown[];
}

/** A transaction whose statements are sent in batches. */
export interface BatchedTransaction {
  /** Runs a batch in the transaction (on MySQL the first one also starts it, in the same round trip). */
  run(statements: Statement[]): Promise<unknown[]>;
  /** Runs the transaction's last batch and commits it (on MySQL in the same round trip). */
  commitWith(statements: Statement[]): Promise<unknown[]>;
  /** The transaction's manager, for statements sent one by one; on MySQL the transaction is started first. */
  open(): Promise<EntityManager>;
}

export interface BatchedTransactionOptions extends WriteOptions {
  /**
   * MySQL: how long (whole seconds) each of the transaction's statements waits for a lock, instead of the server's
   * `innodb_lock_wait_timeout`; set on its connection with the START TRANSACTION and set back with its end.
   */
  lockWaitSeconds?: number;
}

const START: Statement = { sql: "START TRANSACTION", parameters: [] };
const ROLLBACK: Statement = { sql: "ROLLBACK", parameters: [] };
const START_READ_COMMITTED: Statement = { sql: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", parameters: [] };
const COMMIT: Statement = { sql: "COMMIT", parameters: [] };

/**
 * One transaction, as `inTransaction` runs it (all or nothing, READ COMMITTED on MySQL, run again after a deadlock),
 * whose statements travel in batches: on MySQL the START TRANSACTION rides with the first batch and the COMMIT
 * with the last, so a transaction of three batches is three round trips. SQLite runs it as `inTransaction` does.
 * A connection lost during the COMMIT's batch throws CommitInDoubt (it may or may not have committed).
 */
export function inBatchedTransaction<T>(
  dataSource: DataSource,
  work: (transaction: BatchedTransaction) => Promise<T>,
  options: BatchedTransactionOptions = {},
): Promise<T> {
  if (dialectOf(dataSource) !== "mysql") {
    const onSqlite = (manager: EntityManager) => {
      const run = (statements: Statement[]) => runBatch(manager, statements);
      return work({ run, commitWith: run, open: async () => manager });
    };
    return inTransaction(dataSource, onSqlite, options);
  }
  return retryingLockConflicts(() => onOneConnection(dataSource, work, options.lockWaitSeconds));
}

async function onOneConnection<T>(
  dataSource: DataSource,
  work: (transaction: BatchedTransaction) => Promise<T>,
  lockWaitSeconds: number | undefined,
) {
  const runner = dataSource.createQueryRunner();
  const startedAt = Date.now();
  const lockWait = lockWaitSeconds === undefined ? [] : [lockWaitOf(lockWaitSeconds)];
  const start = [...(readCommittedAlready(dataSource) ? [START] : [START_READ_COMMITTED, START]), ...lockWait];
  const end = lockWaitSeconds === undefined ? [] : [LOCK_WAIT_AS_CONFIGURED];
  const transaction: { state: "idle" | "open" | "committed" } = { state: "idle" };
  const connectionId = () => threadIdOf(runner.manager);
  const committing = (statements: Statement[]) =>
    runBatch(runner.manager, statements).catch((error: unknown) => {
      const id = connectionId();
      throw isConnectionLost(error) && id !== undefined ? new CommitInDoubt(id, startedAt) : error;
    });
  const run = async (statements: Statement[], commit: boolean) => {
    if (transaction.state === "committed") throw new Error("the transaction has committed");
    const opening = transaction.state === "idle" ? start : [];
    transaction.state = "open";
    const batch = [...opening, ...statements, ...(commit ? [COMMIT, ...end] : [])];
    const results = await (commit ? committing(batch) : runBatch(runner.manager, batch));
    if (commit) transaction.state = "committed";
    return results.slice(opening.length, opening.length + statements.length);
  };
  try {
    const result = await work({
      run: (statements) => run(statements, false),
      commitWith: (statements) => run(statements, true),
      open: async () => {
        if (transaction.state !== "open") await run([], false);
        return runner.manager;
      },
    });
    if (transaction.state === "open") await committing([COMMIT, ...end]);
    transaction.state = "committed";
    return result;
  } catch (error) {
    if (transaction.state === "open") await runBatch(runner.manager, [ROLLBACK, ...end]).catch(() => undefined);
    throw error;
  } finally {
    await runner.release();
  }
}

/** A transaction as inBatchedTransaction runs it, with `options`, whose statements are sent one by one. */
export function inManagedTransaction<T>(
  dataSource: DataSource,
  options: BatchedTransactionOptions,
  work: (manager: EntityManager) => Promise<T>,
): Promise<T> {
  return inBatchedTransaction(dataSource, async (transaction) => work(await transaction.open()), options);
}
