import { formatDuration, parseDurationList } from "../platform/durations.js";

// A retry schedule lists the delays before each attempt of a delivery: entry i is the delay before attempt
// i + 1, counted from the end of the attempt before (from fan-out for the first).

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts over about 27.5 hours (as Svix). */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = Object.freeze([
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
]);

export const MAX_RETRY_SCHEDULE_ENTRIES = 50;
export const MAX_RETRY_DELAY_MS = 7 * DAY;
/** The longest wait a receiver's Retry-After can impose. */
export const MAX_RETRY_AFTER_MS = DAY;

/**
 * A schedule from its text (`0s,5s,5m`): 1 to 50 durations, each at most 7 days; only the first may be zero.
 * Throws an Error whose message follows the variable's name (the config layer wraps it in a ConfigError).
 */
export function parseRetrySchedule(text: string): number[] {
  const schedule = parseDurationList(text);
  if (schedule.length > MAX_RETRY_SCHEDULE_ENTRIES) {
    throw new Error(`must have at most ${MAX_RETRY_SCHEDULE_ENTRIES} entries, got ${schedule.length}`);
  }
  schedule.forEach((delay, index) => {
    if (delay > MAX_RETRY_DELAY_MS) {
      throw new Error(
        `entry ${index + 1} must be at most ${formatDuration(MAX_RETRY_DELAY_MS)}, got ${formatDuration(delay)}`,
      );
    }
    if (delay === 0 && index > 0) throw new Error(`entry ${index + 1} must be longer than 0 (only the first may be 0)`);
  });
  return schedule;
}

/**
 * Milliseconds until the next attempt after `attemptsMade` attempts of this schedule, or null when it is
 * exhausted. A non-zero delay is jittered ±20 % (× 0.8 + 0.4·random()); a receiver's Retry-After (capped at
 * 24 h) makes the wait at least that long, but never adds an attempt.
 */
export function nextAttemptDelayMs(
  schedule: readonly number[],
  attemptsMade: number,
  random: () => number,
  retryAfterMs?: number,
): number | null {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 0) {
    throw new RangeError(`attemptsMade must be a whole number, got ${attemptsMade}`);
  }
  if (attemptsMade >= schedule.length) return null;
  const delay = jittered(schedule[attemptsMade], random);
  if (retryAfterMs === undefined || !(retryAfterMs > 0)) return delay;
  return Math.max(delay, Math.min(Math.ceil(retryAfterMs), MAX_RETRY_AFTER_MS));
}

function jittered(delay: number, random: () => number): number {
  return delay === 0 ? 0 : Math.round(delay * (0.8 + 0.4 * random()));
}

const DELTA_SECONDS = /^[0-9]+$/;
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/;

/**
 * A Retry-After header in milliseconds from `now`: delta-seconds (`120`) or an IMF-fixdate HTTP-date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`; a past date gives 0). Undefined when absent or anything else.
 */
export function parseRetryAfter(header: string | undefined, now: Date): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (DELTA_SECONDS.test(value)) return Math.min(Number(value) * SECOND, Number.MAX_SAFE_INTEGER);
  if (!IMF_FIXDATE.test(value)) return undefined;
  const date = new Date(value);
  // The round trip refuses impossible dates (31 Feb, 24:00:00, a wrong weekday), which Date would roll over.
  if (Number.isNaN(date.getTime()) || date.toUTCString() !== value) return undefined;
  return Math.max(0, date.getTime() - now.getTime());
}
