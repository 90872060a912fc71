import { isRateLimited, type RateLimiter } from "./coordinator.js";

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
  /** Gives the point back (soon: see `countAttempt`); a failure to is told to `warn`, never thrown. */
  succeeded(): void;
}

/**
 * Points given back are held this long at most before they are sent alone; an attempt of the same subject
 * meanwhile carries them in its own command. A point given back late keeps the limit stricter, never looser.
 */
const HOLD_MS = 100;

/**
 * Counts one attempt of `subject`, atomically and before it is checked, and throws RateLimited when the window's
 * attempts, less its successful ones, exceed the limit. So however many failing attempts arrive at once, exactly
 * the limit of them are checked in a window and the rest are refused (the subject's good attempts too, until the
 * window ends). When the coordinator is unreachable the attempt goes through uncounted and `warn` is told:
 * losing Redis must not lock everybody out. The points the subject's successes gave back since its last attempt
 * travel in this attempt's command (one command, not two, an attempt of a busy address: a NAT, a build farm).
 */
export async function countAttempt(
  limiter: RateLimiter,
  subject: string,
  warn: (error: unknown) => void,
): Promise<CountedAttempt> {
  const started = performance.now();
  const givenBack = heldGiveBacks(limiter).take(subject, started);
  let msLeftInWindow: number;
  try {
    msLeftInWindow = (await limiter.consume(subject, 1 - givenBack)).msBeforeNext;
  } catch (reason) {
    if (isRateLimited(reason)) throw new RateLimited(reason.msBeforeNext);
    warn(reason);
    return { succeeded: () => {} };
  }
  const deadline = started + msLeftInWindow - REWARD_MARGIN_MS;
  return { succeeded: () => heldGiveBacks(limiter).hold(subject, deadline, warn) };
}

/** Sends every point held for `limiter` now rather than when its hold ends (tests do, not to wait it out). */
export function sendHeldGiveBacks(limiter: RateLimiter): Promise<void> {
  return heldGiveBacks(limiter).send();
}

const heldByLimiter = new WeakMap<RateLimiter, HeldGiveBacks>();

function heldGiveBacks(limiter: RateLimiter): HeldGiveBacks {
  let held = heldByLimiter.get(limiter);
  if (!held) {
    held = new HeldGiveBacks(limiter);
    heldByLimiter.set(limiter, held);
  }
  return held;
}

/** Points given back, per subject, each with the time (`performance.now()`) after which it may not be given. */
class HeldGiveBacks {
  private readonly bySubject = new Map<string, { deadlines: number[]; warn: (error: unknown) => void }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limiter: RateLimiter) {}

  hold(subject: string, deadline: number, warn: (error: unknown) => void): void {
    if (deadline <= performance.now()) return;
    const held = this.bySubject.get(subject);
    if (held) held.deadlines.push(deadline);
    else this.bySubject.set(subject, { deadlines: [deadline], warn });
    this.timer ??= setTimeout(() => void this.send(), HOLD_MS).unref();
  }

  /** The subject's held points that may still be given at `now`, no longer held. */
  take(subject: string, now: number): number {
    const held = this.bySubject.get(subject);
    if (!held) return 0;
    this.bySubject.delete(subject);
    return held.deadlines.filter((deadline) => deadline > now).length;
  }

  async send(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = performance.now();
    const sends = [...this.bySubject].map(([subject, { warn }]) => {
      const points = this.take(subject, now);
      return points > 0 ? this.limiter.reward(subject, points).then(() => undefined, warn) : undefined;
    });
    await Promise.all(sends);
  }
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
