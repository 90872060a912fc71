import { DomainError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { warnThrottled } from "../platform/throttled-warnings.js";
import type { UsageMeters } from "../platform/usage-meters.js";

/**
 * The coordinator's counters, with a failure of the coordinator itself (Redis unreachable, too slow) answered
 * as 503 `counters-unavailable`: no usage is recorded or granted without the counters that keep it exact.
 */
export function guardedMeters(meters: UsageMeters, logger: Logger): UsageMeters {
  const guard = <T>(work: Promise<T>): Promise<T> =>
    work.catch((error: Error) => {
      warnThrottled(logger, { err: { message: error.message } }, "usage counters failed");
      throw countersUnavailable("the coordinator did not answer");
    });
  return {
    reserve: (request) => guard(meters.reserve(request)),
    release: (key, generation, amount, mode) => guard(meters.release(key, generation, amount, mode)),
    generationOf: (key) => guard(meters.generationOf(key)),
    load: (key, generation, value, limit) => guard(meters.load(key, generation, value, limit)),
  };
}

/** 503 `counters-unavailable`, with Retry-After: the request may be sent again as it is. */
export function countersUnavailable(why: string): DomainError {
  return new DomainError("unavailable", `usage counters are unavailable: ${why}; try again`, {
    slug: "counters-unavailable",
    headers: { "retry-after": "1" },
  });
}
