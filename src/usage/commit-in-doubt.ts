import type { DataSource } from "typeorm";
import type { Logger } from "../platform/logger.js";
import { type CommitInDoubt, endLostConnection } from "../platform/lost-connections.js";
import type { MeterRef } from "./meter-counters.js";
import { periodName } from "./usage-store.js";

/** A recount that could not be made at once (MySQL down: the likely cause of the loss) is tried again, … */
const RETRY_FIRST_MS = 500;
const RETRY_LONGEST_MS = 30_000;
/** … until this long after the loss; the hourly recount job catches any counter left then. */
const RETRY_FOR_MS = 60 * 60_000;

interface RecountOptions {
  dataSource: DataSource;
  logger: Logger;
  rebuild: (ref: MeterRef) => Promise<void>;
}

/**
 * After a COMMIT whose answer was lost, the reservations it held are neither given back (the records may be
 * there) nor kept as they are (they may not): once the lost connection has ended on the server, each counter is
 * rebuilt from the records, which then count exactly what was committed. What cannot be recounted now is tried
 * again in the background, so that a counter left above its records does not refuse grants until the hourly
 * recount. Answers `doubt`, for the caller to throw.
 */
export async function recountAfterDoubt(
  options: RecountOptions,
  doubt: CommitInDoubt,
  refs: MeterRef[],
): Promise<CommitInDoubt> {
  const byPeriod = new Map(refs.map((ref) => [periodName(ref.assetId, ref.periodStart), ref]));
  const { left, failure } = await settleAndRecount(options, doubt, [...byPeriod.values()]);
  if (left.length > 0) {
    options.logger.warn(
      { err: { message: failure?.message }, counters: left.length },
      "could not recount a counter after a lost COMMIT; trying again in the background",
    );
    retryLater(options, doubt, left, RETRY_FIRST_MS, Date.now() + RETRY_FOR_MS);
  }
  return doubt;
}

/** The counters not recounted (all of them when the lost connection could not be ended), and why. */
async function settleAndRecount(
  options: RecountOptions,
  doubt: CommitInDoubt,
  refs: MeterRef[],
): Promise<{ left: MeterRef[]; failure?: Error }> {
  try {
    await endLostConnection(options.dataSource, doubt);
  } catch (error) {
    return { left: refs, failure: error as Error };
  }
  const left: MeterRef[] = [];
  let failure: Error | undefined;
  for (const ref of refs) {
    await options.rebuild(ref).catch((error: Error) => {
      left.push(ref);
      failure = error;
    });
  }
  return { left, failure };
}

function retryLater(options: RecountOptions, doubt: CommitInDoubt, refs: MeterRef[], delayMs: number, until: number) {
  const retry = async () => {
    if (!options.dataSource.isInitialized) return; // the instance closed
    const { left, failure } = await settleAndRecount(options, doubt, refs);
    if (left.length === 0) {
      options.logger.info({ counters: refs.length }, "recounted after a lost COMMIT");
    } else if (Date.now() + delayMs < until) {
      retryLater(options, doubt, left, Math.min(delayMs * 2, RETRY_LONGEST_MS), until);
    } else {
      options.logger.warn(
        { err: { message: failure?.message }, counters: left.length },
        "gave up recounting after a lost COMMIT; the hourly recount will",
      );
    }
  };
  setTimeout(() => void retry(), delayMs).unref();
}
