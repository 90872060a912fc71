import { type DataSource, QueryFailedError } from "typeorm";

/** Whether the error is the driver's connection lost (reset, closed): what was sent may or may not have run. */
export function isConnectionLost(error: unknown): boolean {
  const driverError = error instanceof QueryFailedError ? error.driverError : error;
  return (driverError as { fatal?: unknown } | undefined)?.fatal === true;
}

const GONE_POLLS = 50;
const GONE_POLL_MS = 100;

/**
 * Ends a MySQL connection whose client side was lost (`threadId`, the server's id of it) and resolves once the
 * server no longer runs it: its transaction has then committed or rolled back for good, and nothing it was sent
 * still in flight can run. Throws when the server keeps it past five seconds.
 */
export async function endLostConnection(dataSource: DataSource, threadId: number): Promise<void> {
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
