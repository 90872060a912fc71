import test from "ava";
import {
  DEFAULT_RETRY_SCHEDULE,
  MAX_RETRY_AFTER_MS,
  nextAttemptDelayMs,
  parseRetryAfter,
  parseRetrySchedule,
} from "../../src/webhooks/retry-schedule.js";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const lowest = () => 0;
const highest = () => 1;
const middle = () => 0.5;

test("the default schedule: immediately, 5s, 5m, 30m, 2h, 5h, 10h, 10h", (t) => {
  t.deepEqual([...DEFAULT_RETRY_SCHEDULE], parseRetrySchedule("0s,5s,5m,30m,2h,5h,10h,10h"));
  t.is(DEFAULT_RETRY_SCHEDULE.length, 8);
  t.true(Object.isFrozen(DEFAULT_RETRY_SCHEDULE));
});

test("parseRetrySchedule: valid schedules", (t) => {
  const cases: [string, number[]][] = [
    ["0s,200ms,1s", [0, 200, SECOND]],
    ["0s", [0]],
    ["1s", [SECOND]],
    [" 5s , 1m ", [5 * SECOND, MINUTE]],
    ["7d,7d", [7 * DAY, 7 * DAY]],
    ["168h", [7 * DAY]],
    [Array(50).fill("1s").join(","), Array(50).fill(SECOND)],
  ];
  for (const [text, schedule] of cases) t.deepEqual(parseRetrySchedule(text), schedule, text);
});

test("parseRetrySchedule: invalid schedules name the problem", (t) => {
  const cases: [string, RegExp][] = [
    ["", /got nothing/],
    ["0s,,1s", /empty entry \(number 2\)/],
    ["0s,5x", /^entry 2 must be a duration/],
    ["-1s", /^entry 1 must be a duration/],
    [Array(51).fill("1s").join(","), /^must have at most 50 entries, got 51$/],
    ["0s,8d", /^entry 2 must be at most 7d, got 8d$/],
    ["0s,169h", /^entry 2 must be at most 7d, got 169h$/],
    ["604800001ms", /^entry 1 must be at most 7d, got 604800001ms$/],
    ["0s,0s", /^entry 2 must be longer than 0 \(only the first may be 0\)$/],
    ["1s,2s,0ms", /^entry 3 must be longer than 0/],
  ];
  for (const [text, message] of cases) t.throws(() => parseRetrySchedule(text), { message }, text);
});

test("nextAttemptDelayMs: entry i is the delay before attempt i + 1", (t) => {
  const schedule = [0, 5 * SECOND, 5 * MINUTE];
  t.is(nextAttemptDelayMs(schedule, 0, middle), 0);
  t.is(nextAttemptDelayMs(schedule, 1, middle), 5 * SECOND);
  t.is(nextAttemptDelayMs(schedule, 2, middle), 5 * MINUTE);
});

test("nextAttemptDelayMs: jitter is exactly 0.8x with random 0 and 1.2x with random 1", (t) => {
  DEFAULT_RETRY_SCHEDULE.forEach((delay, attemptsMade) => {
    t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, attemptsMade, lowest), (delay * 8) / 10);
    t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, attemptsMade, highest), (delay * 12) / 10);
  });
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, lowest), 4 * SECOND);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, highest), 6 * SECOND);
  t.is(nextAttemptDelayMs([0, 10 * HOUR], 1, highest), 12 * HOUR);
});

test("nextAttemptDelayMs: jittered delays stay within ±20 % and are whole milliseconds", (t) => {
  for (let index = 0; index < 1000; index++) {
    const value = Math.random();
    const delay = nextAttemptDelayMs([0, 333], 1, () => value) ?? Number.NaN;
    t.true(Number.isInteger(delay) && delay >= 266 && delay <= 400, `${delay} for random ${value}`);
  }
});

test("nextAttemptDelayMs: a zero delay stays zero whatever the random value", (t) => {
  for (const random of [lowest, middle, highest]) t.is(nextAttemptDelayMs([0, SECOND], 0, random), 0);
});

test("nextAttemptDelayMs: null once every entry was used, Retry-After or not", (t) => {
  t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, 7, middle), 10 * HOUR);
  t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, 8, middle), null);
  t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, 9, middle), null);
  t.is(nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, 8, middle, 60 * SECOND), null);
  t.is(nextAttemptDelayMs([0], 1, middle, SECOND), null);
});

test("nextAttemptDelayMs: refuses a negative or fractional attempt count", (t) => {
  t.throws(() => nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, -1, middle), { instanceOf: RangeError });
  t.throws(() => nextAttemptDelayMs(DEFAULT_RETRY_SCHEDULE, 1.5, middle), { instanceOf: RangeError });
});

test("nextAttemptDelayMs: a longer Retry-After wins over the jittered delay", (t) => {
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, highest, 120 * SECOND), 120 * SECOND);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, lowest, 4 * SECOND + 1), 4 * SECOND + 1);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 0, highest, 2 * SECOND), 2 * SECOND);
});

test("nextAttemptDelayMs: a shorter Retry-After leaves the jittered delay", (t) => {
  t.is(nextAttemptDelayMs([0, 5 * MINUTE], 1, lowest, 10 * SECOND), 4 * MINUTE);
  t.is(nextAttemptDelayMs([0, 5 * MINUTE], 1, highest, 0), 6 * MINUTE);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, lowest, 4 * SECOND), 4 * SECOND);
});

test("nextAttemptDelayMs: Retry-After counts for at most 24 hours", (t) => {
  t.is(MAX_RETRY_AFTER_MS, DAY);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, middle, 3 * DAY), DAY);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, middle, Number.MAX_SAFE_INTEGER), DAY);
  t.is(nextAttemptDelayMs([0, 5 * SECOND], 1, middle, DAY - 1), DAY - 1);
  // The cap limits what Retry-After imposes, never the schedule's own delay.
  t.is(nextAttemptDelayMs([0, 7 * DAY], 1, highest, 3 * DAY), (7 * DAY * 12) / 10);
});

const NOW = new Date("2026-03-01T12:00:00.250Z");

test("parseRetryAfter: delta-seconds", (t) => {
  t.is(parseRetryAfter("0", NOW), 0);
  t.is(parseRetryAfter("2", NOW), 2 * SECOND);
  t.is(parseRetryAfter("120", NOW), 120 * SECOND);
  t.is(parseRetryAfter(" 30 ", NOW), 30 * SECOND);
  t.is(parseRetryAfter("0060", NOW), 60 * SECOND);
  t.is(parseRetryAfter("9".repeat(400), NOW), Number.MAX_SAFE_INTEGER);
});

test("parseRetryAfter: an IMF-fixdate HTTP-date, relative to now", (t) => {
  t.is(parseRetryAfter("Sun, 01 Mar 2026 12:02:00 GMT", NOW), 2 * MINUTE - 250);
  t.is(parseRetryAfter("Mon, 02 Mar 2026 12:00:00 GMT", NOW), DAY - 250);
  t.is(parseRetryAfter("Sun, 01 Mar 2026 12:00:01 GMT", NOW), 750);
});

test("parseRetryAfter: a date in the past or now means at once", (t) => {
  t.is(parseRetryAfter("Sun, 01 Mar 2026 12:00:00 GMT", NOW), 0);
  t.is(parseRetryAfter("Sat, 28 Feb 2026 12:00:00 GMT", NOW), 0);
  t.is(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", NOW), 0);
});

test("parseRetryAfter: absent, empty or anything else is undefined", (t) => {
  const invalid = [
    undefined,
    "",
    "  ",
    "-1",
    "+5",
    "1.5",
    "1e3",
    "5s",
    "0x10",
    "soon",
    "120, 60",
    "Sunday, 01-Mar-26 12:02:00 GMT",
    "Sun Mar  1 12:02:00 2026",
    "2026-03-01T12:02:00Z",
    "Sun, 1 Mar 2026 12:02:00 GMT",
    "Sun, 01 Mar 2026 12:02:00 UTC",
    "Sun, 01 Mar 2026 12:02:00 +0000",
    "sun, 01 mar 2026 12:02:00 GMT",
    "Mon, 01 Mar 2026 12:02:00 GMT",
    "Sat, 31 Feb 2026 12:00:00 GMT",
    "Sun, 01 Mar 2026 24:00:00 GMT",
    "Sun, 01 Mar 2026 12:60:00 GMT",
    "Sun, 01 Mar 2026 12:02:00 GMT extra",
  ];
  for (const header of invalid) t.is(parseRetryAfter(header, NOW), undefined, JSON.stringify(header));
});

test("parseRetryAfter feeds nextAttemptDelayMs", (t) => {
  const schedule = [0, 5 * SECOND, 5 * MINUTE];
  t.is(nextAttemptDelayMs(schedule, 1, lowest, parseRetryAfter("30", NOW)), 30 * SECOND);
  t.is(nextAttemptDelayMs(schedule, 1, lowest, parseRetryAfter("soon", NOW)), 4 * SECOND);
  t.is(nextAttemptDelayMs(schedule, 2, lowest, parseRetryAfter("Tue, 03 Mar 2026 12:00:00 GMT", NOW)), DAY);
});
