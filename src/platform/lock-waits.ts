import type { Statement } from "./statement-batch.js";

/** The session's lock-wait timeout set back to the server's (`innodb_lock_wait_timeout`, 50 s by default). */
export const LOCK_WAIT_AS_CONFIGURED: Statement = {
  sql: "SET SESSION innodb_lock_wait_timeout = DEFAULT",
  parameters: [],
};

/**
 * `statements` (MySQL) each waiting at most `seconds` (whole) for a lock, between a statement setting the session's
 * lock-wait timeout and one setting it back: their results come at 1 … statements.length. When one times out the
 * statements after it do not run, so the caller sends LOCK_WAIT_AS_CONFIGURED itself before the connection is used
 * again.
 */
export function waitingAtMost(seconds: number, statements: Statement[]): Statement[] {
  return [lockWaitOf(seconds), ...statements, LOCK_WAIT_AS_CONFIGURED];
}

/** Sets the session's lock-wait timeout to `seconds` (whole), until LOCK_WAIT_AS_CONFIGURED. */
export function lockWaitOf(seconds: number): Statement {
  return { sql: "SET SESSION innodb_lock_wait_timeout = ?", parameters: [seconds] };
}
