import type { RateLimiterAbstract } from "rate-limiter-flexible";
import RateLimiterRes from "rate-limiter-flexible/lib/RateLimiterRes.js";
import type { UsageMeters } from "./usage-meters.js";

/**
 * What must be atomic and fast across instances: seat leases, metering counters, rate limits and short
 * locks. Redis in production (`redis-coordinator.ts`), in-process for one embedded instance
 * (`memory-coordinator.ts`); both honour the same contract (test/integration/coordinator-contract.test.ts).
 */
export interface Coordinator {
  readonly kind: "redis" | "memory";
  ping(): Promise<void>;
  /**
   * The fixed-window limiter named `options.name` (rate-limiter-flexible), counting in this coordinator's
   * store, so every instance on one Redis shares its counts. The same name answers the same limiter.
   */
  rateLimiter(options: RateLimitOptions): RateLimiter;
  /** Usage counters (metering and credit balances), rebuilt from the database when lost. */
  readonly meters: UsageMeters;
  close(): Promise<void>;
}

export interface RateLimitOptions {
  /** Prefixes the limiter's keys: limiters of different names never share a count. */
  name: string;
  /** Points a key may consume in a window; consuming beyond them is refused until the window ends. */
  points: number;
  /** The window, which starts with a key's first point; whole seconds, as rate-limiter-flexible counts. */
  durationSeconds: number;
}

/**
 * The operations Provision uses. `consume` resolves with the key's state while it is within its points,
 * rejects with that state (a `RateLimiterRes`, see `isRateLimited`) beyond them, and rejects with an `Error`
 * when the store fails. `reward` gives points back within the current window.
 */
export type RateLimiter = Pick<RateLimiterAbstract, "consume" | "reward" | "get" | "delete">;

/** A refusal of `consume`, as opposed to a failure of the store. */
export function isRateLimited(reason: unknown): reason is RateLimiterRes {
  return reason instanceof RateLimiterRes;
}

/** One limiter per name, made on first use; a name asked for again with other options is a programming error. */
export function limiterRegistry(
  make: (options: RateLimitOptions) => RateLimiter,
): (options: RateLimitOptions) => RateLimiter {
  const limiters = new Map<string, { options: RateLimitOptions; limiter: RateLimiter }>();
  return (options) => {
    const known = limiters.get(options.name);
    if (!known) {
      const limiter = make(options);
      limiters.set(options.name, { options, limiter });
      return limiter;
    }
    if (known.options.points !== options.points || known.options.durationSeconds !== options.durationSeconds) {
      throw new Error(`rate limiter ${options.name} exists with other points or duration`);
    }
    return known.limiter;
  };
}
