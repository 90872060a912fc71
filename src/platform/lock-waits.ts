import type { Statement } from "./statement-batch.js";

/** The session's lock-wait timeout set back to the server's (`innodb_lock_wait_timeout`, 50 s by default). */
export const LOCK_WAIT_AS_CONFIGURED: Statement = {
  sql: "SET SESSION innodb_lock_wait_timeout = DEFAULT",
  parameters: [],
};

/** Sets the session's lock-wait timeout to `seconds` (whole), until LOCK_WAIT_AS_CONFIGURED. */
export function lockWaitOf(seconds: number): Statement {
  return { sql: "SET SESSION innodb_lock_wait_timeout = ?", parameters: [seconds] };
}
