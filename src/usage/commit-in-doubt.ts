import type { DataSource } from "typeorm";
import type { Logger } from "../platform/logger.js";
import { type CommitInDoubt, endLostConnection } from "../platform/lost-connections.js";
import type { MeterRef } from "./meter-counters.js";
import { periodName } from "./usage-store.js";

/**
 * After a COMMIT whose answer was lost, the reservations it held are neither given back (the records may be
 * there) nor kept as they are (they may not): once the lost connection has ended on the server, each counter is
 * rebuilt from the records, which then count exactly what was committed. Answers `doubt`, for the caller to throw.
 */
export async function recountAfterDoubt(
  options: { dataSource: DataSource; logger: Logger; rebuild: (ref: MeterRef) => Promise<void> },
  doubt: CommitInDoubt,
  refs: MeterRef[],
): Promise<CommitInDoubt> {
  const warn = (error: Error) =>
    options.logger.warn({ err: { message: error.message } }, "could not recount a counter after a lost COMMIT");
  await endLostConnection(options.dataSource, doubt).catch(warn);
  const byPeriod = new Map(refs.map((ref) => [periodName(ref.assetId, ref.periodStart), ref]));
  for (const ref of byPeriod.values()) await options.rebuild(ref).catch(warn);
  return doubt;
}
