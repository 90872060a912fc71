import { isRateLimited, type RateLimiter } from "./coordinator.js";
import { GroupCommit } from "./group-commit.js";

/**
 * A success is given back to its window only while this much of the window is left: given back after the
 * window ended (as Redis's clock has it), it would open the next window one failure short of its limit. Twice
 * the coordinator's command deadline, so a give-back that our side abandoned cannot land after the window.
 */
const REWARD_MARGIN_MS = 2000;

/** Refused by a rate limit: try again after `retryAfterMs`. */
export class RateLimited extends Error {
  constructor(readonly retryAfterMs: number) {
    super("rate limited");
  }
}

/** Whole seconds to wait, for a `Retry-After` header: at least 1. */
export function retryAfterSeconds(limited: RateLimited): number {
  return Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
}

/** An attempt counted against its limit; a success gives its point back. */
export interface CountedAttempt {
  succeeded(): Promise<void>;
}

/**
 * Counts one attempt of `subject`, atomically and before it is checked, and throws RateLimited when the window's
 * attempts, less its successful ones, exceed the limit. So however many failing attempts arrive at once, exactly
 * the limit of them are checked in a window and the rest are refused (the subject's good attempts too, until the
 * window ends). When the coordinator is unreachable the attempt goes through uncounted and `warn` is told:
 * losing Redis must not lock everybody out.
 */
export async function countAttempt(
  limiter: RateLimiter,
  subject: string,
  warn: (error: unknown) => void,
): Promise<CountedAttempt> {
  const started = performance.now();
  let msLeftInWindow: number;
  try {
    msLeftInWindow = (await limiter.consume(subject)).msBeforeNext;
  } catch (reason) {
    if (isRateLimited(reason)) throw new RateLimited(reason.msBeforeNext);
    warn(reason);
    return { succeeded: async () => {} };
  }
  return {
    async succeeded() {
      if (msLeftInWindow - (performance.now() - started) < REWARD_MARGIN_MS) return;
      await giveBack(limiter, subject, warn);
    },
  };
}

interface GiveBack {
  subject: string;
  warn: (error: unknown) => void;
}

const giveBacksByLimiter = new WeakMap<RateLimiter, GroupCommit<GiveBack, undefined>>();

/**
 * Gives one point back to `subject`. The give-backs of one event-loop turn travel together, one command per
 * subject: busy addresses (a NAT, a build farm) cost one Redis round trip an attempt, not two. A point given back
 * a turn late keeps the limit a turn stricter, never looser.
 */
function giveBack(limiter: RateLimiter, subject: string, warn: (error: unknown) => void): Promise<void> {
  let giveBacks = giveBacksByLimiter.get(limiter);
  if (!giveBacks) {
    giveBacks = new GroupCommit((jobs) => rewardTogether(limiter, jobs), {
      weigh: () => 1,
      maxWeight: Number.POSITIVE_INFINITY,
      maxInFlight: Number.POSITIVE_INFINITY,
      gatherTurns: 1,
    });
    giveBacksByLimiter.set(limiter, giveBacks);
  }
  return giveBacks.submit({ subject, warn });
}

async function rewardTogether(limiter: RateLimiter, jobs: GiveBack[]): Promise<undefined[]> {
  const bySubject = new Map<string, { points: number; warn: GiveBack["warn"] }>();
  for (const { subject, warn } of jobs) {
    const given = bySubject.get(subject);
    if (given) given.points++;
    else bySubject.set(subject, { points: 1, warn });
  }
  await Promise.all(
    [...bySubject].map(([subject, { points, warn }]) => limiter.reward(subject, points).then(() => undefined, warn)),
  );
  return jobs.map(() => undefined);
}

/** Counts one request against `key`, throwing RateLimited beyond the limit; unlimited (and `warn`) without Redis. */
export async function limitRequest(limiter: RateLimiter, key: string, warn: (error: unknown) => void): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (reason) {
    if (isRateLimited(reason)) throw new RateLimited(reason.msBeforeNext);
    warn(reason);
  }
}
