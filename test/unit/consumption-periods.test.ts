import test, { type ExecutionContext } from "ava";
import { type ConsumptionPeriod, parseConsumptionPeriod, periodOf } from "../../src/usage/consumption-periods.js";

const SECOND = 1000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

function parsed(t: ExecutionContext, text: string): ConsumptionPeriod {
  const period = parseConsumptionPeriod(text);
  if ("problem" in period) t.fail(`${JSON.stringify(text)} was refused: ${period.problem}`);
  return period as ConsumptionPeriod;
}

/** The period of `text` holding the instant, as ISO texts. */
function span(t: ExecutionContext, text: string, instant: string): [string, string] {
  const { start, end } = periodOf(parsed(t, text), new Date(instant));
  return [start.toISOString(), end.toISOString()];
}

function refusal(text: string): string {
  const period = parseConsumptionPeriod(text);
  return "problem" in period ? period.problem : "accepted";
}

test("empty or blank is one UTC calendar month, like P1M", (t) => {
  for (const text of ["", "   ", "P1M", "p1m", " P1M "]) {
    t.deepEqual(span(t, text, "2024-05-17T08:30:00Z"), ["2024-05-01T00:00:00.000Z", "2024-06-01T00:00:00.000Z"], text);
  }
});

test("months end and start exactly on the boundary, February of leap years included", (t) => {
  t.deepEqual(span(t, "P1M", "2024-02-29T23:59:59.999Z"), ["2024-02-01T00:00:00.000Z", "2024-03-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1M", "2024-03-01T00:00:00.000Z"), ["2024-03-01T00:00:00.000Z", "2024-04-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1M", "2023-02-28T12:00:00Z"), ["2023-02-01T00:00:00.000Z", "2023-03-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1M", "2100-02-28T12:00:00Z"), ["2100-02-01T00:00:00.000Z", "2100-03-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1M", "2024-12-31T23:59:59.999Z"), ["2024-12-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1M", "1969-12-15T00:00:00Z"), ["1969-12-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"]);
});

test("P3M is calendar quarters", (t) => {
  t.deepEqual(span(t, "P3M", "2024-01-01T00:00:00Z"), ["2024-01-01T00:00:00.000Z", "2024-04-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P3M", "2024-03-31T23:59:59.999Z"), ["2024-01-01T00:00:00.000Z", "2024-04-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P3M", "2024-04-01T00:00:00Z"), ["2024-04-01T00:00:00.000Z", "2024-07-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P3M", "2024-11-15T00:00:00Z"), ["2024-10-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P3M", "1969-11-15T00:00:00Z"), ["1969-10-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"]);
});

test("P1Y and P12M are calendar years; P2Y counts even years from 1970; P6M halves", (t) => {
  for (const text of ["P1Y", "P12M"]) {
    t.deepEqual(span(t, text, "2024-07-04T00:00:00Z"), ["2024-01-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"]);
    t.deepEqual(span(t, text, "2025-01-01T00:00:00Z"), ["2025-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"]);
  }
  t.deepEqual(span(t, "P2Y", "2025-06-01T00:00:00Z"), ["2024-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P2Y", "1969-06-01T00:00:00Z"), ["1968-01-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P6M", "2024-07-01T00:00:00Z"), ["2024-07-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"]);
});

test("P1D is UTC days and PnD counts days from 1970-01-01", (t) => {
  t.deepEqual(span(t, "P1D", "2024-02-29T13:00:00Z"), ["2024-02-29T00:00:00.000Z", "2024-03-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1D", "2024-03-01T00:00:00Z"), ["2024-03-01T00:00:00.000Z", "2024-03-02T00:00:00.000Z"]);
  t.deepEqual(span(t, "P2D", "1970-01-02T05:00:00Z"), ["1970-01-01T00:00:00.000Z", "1970-01-03T00:00:00.000Z"]);
  t.deepEqual(span(t, "P7D", "2024-05-13T12:00:00Z"), ["2024-05-09T00:00:00.000Z", "2024-05-16T00:00:00.000Z"]);
});

test("weeks are ISO weeks from Monday 00:00 UTC; P2W counts pairs from Monday 1969-12-29", (t) => {
  t.deepEqual(span(t, "P1W", "2024-05-15T12:00:00Z"), ["2024-05-13T00:00:00.000Z", "2024-05-20T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1W", "2024-05-19T23:59:59.999Z"), ["2024-05-13T00:00:00.000Z", "2024-05-20T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1W", "2024-05-20T00:00:00Z"), ["2024-05-20T00:00:00.000Z", "2024-05-27T00:00:00.000Z"]);
  t.deepEqual(span(t, "P1W", "1970-01-01T00:00:00Z"), ["1969-12-29T00:00:00.000Z", "1970-01-05T00:00:00.000Z"]);
  t.deepEqual(span(t, "P2W", "1970-01-06T00:00:00Z"), ["1969-12-29T00:00:00.000Z", "1970-01-12T00:00:00.000Z"]);
  for (const instant of ["2024-05-15T12:00:00Z", "2031-09-03T01:00:00Z", "1999-12-31T23:00:00Z"]) {
    for (const text of ["P1W", "P2W", "P5W"]) t.is(periodOf(parsed(t, text), new Date(instant)).start.getUTCDay(), 1);
  }
});

test("hours, minutes and seconds are aligned to the epoch", (t) => {
  t.deepEqual(span(t, "PT1H", "2024-05-15T12:34:56Z"), ["2024-05-15T12:00:00.000Z", "2024-05-15T13:00:00.000Z"]);
  t.deepEqual(span(t, "PT6H", "2024-05-15T18:00:00Z"), ["2024-05-15T18:00:00.000Z", "2024-05-16T00:00:00.000Z"]);
  t.deepEqual(span(t, "PT15M", "2024-05-15T12:44:59.999Z"), ["2024-05-15T12:30:00.000Z", "2024-05-15T12:45:00.000Z"]);
  t.deepEqual(span(t, "PT1S", "2024-05-15T12:00:00.250Z"), ["2024-05-15T12:00:00.000Z", "2024-05-15T12:00:01.000Z"]);
  t.deepEqual(span(t, "PT90S", "1970-01-01T00:01:31Z"), ["1970-01-01T00:01:30.000Z", "1970-01-01T00:03:00.000Z"]);
});

test("mixed day, week and time units are one fixed length aligned to the epoch", (t) => {
  t.deepEqual(span(t, "P1DT12H", "1970-01-02T13:00:00Z"), ["1970-01-02T12:00:00.000Z", "1970-01-04T00:00:00.000Z"]);
  t.deepEqual(span(t, "PT1H30M", "1970-01-01T01:30:00Z"), ["1970-01-01T01:30:00.000Z", "1970-01-01T03:00:00.000Z"]);
  t.deepEqual(span(t, "P1W1D", "1970-01-09T00:00:00Z"), ["1970-01-09T00:00:00.000Z", "1970-01-17T00:00:00.000Z"]);
  const { start, end } = periodOf(parsed(t, "P1DT2H3M4S"), new Date("2024-05-15T00:00:00Z"));
  t.is(end.getTime() - start.getTime(), DAY + 2 * HOUR + 3 * 60 * SECOND + 4 * SECOND);
  t.is(start.getTime() % (end.getTime() - start.getTime()), 0);
});

test("a 5-field cron expression: fire times bound the periods, an instant on a fire time starts one", (t) => {
  t.deepEqual(span(t, "0 0 1 * *", "2024-02-15T00:00:00Z"), ["2024-02-01T00:00:00.000Z", "2024-03-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "0 0 1 * *", "2024-03-01T00:00:00Z"), ["2024-03-01T00:00:00.000Z", "2024-04-01T00:00:00.000Z"]);
  t.deepEqual(span(t, "0 0 1 * *", "2024-02-29T23:59:59.999Z"), [
    "2024-02-01T00:00:00.000Z",
    "2024-03-01T00:00:00.000Z",
  ]);
  t.deepEqual(span(t, "0 */6 * * *", "2024-05-15T05:59:59Z"), ["2024-05-15T00:00:00.000Z", "2024-05-15T06:00:00.000Z"]);
  t.deepEqual(span(t, "0 */6 * * *", "2024-05-15T06:00:00Z"), ["2024-05-15T06:00:00.000Z", "2024-05-15T12:00:00.000Z"]);
  t.deepEqual(span(t, "0 */6 * * *", "2024-05-15T23:00:00Z"), ["2024-05-15T18:00:00.000Z", "2024-05-16T00:00:00.000Z"]);
  t.deepEqual(span(t, "30 9 * * MON", "2024-05-15T00:00:00Z"), [
    "2024-05-13T09:30:00.000Z",
    "2024-05-20T09:30:00.000Z",
  ]);
  t.deepEqual(span(t, "0 0 29 2 *", "2025-06-01T00:00:00Z"), ["2024-02-29T00:00:00.000Z", "2028-02-29T00:00:00.000Z"]);
});

test("a 6-field cron expression counts seconds, and an alias such as @daily is a cron expression", (t) => {
  t.deepEqual(span(t, "*/10 * * * * *", "2024-05-15T12:00:09.999Z"), [
    "2024-05-15T12:00:00.000Z",
    "2024-05-15T12:00:10.000Z",
  ]);
  t.deepEqual(span(t, "*/10 * * * * *", "2024-05-15T12:00:10Z"), [
    "2024-05-15T12:00:10.000Z",
    "2024-05-15T12:00:20.000Z",
  ]);
  t.deepEqual(span(t, "@daily", "2024-05-15T12:00:00Z"), ["2024-05-15T00:00:00.000Z", "2024-05-16T00:00:00.000Z"]);
});

test("a cron period answered from the last one found is the same as a fresh parse's", (t) => {
  const period = parsed(t, "0 0 * * *");
  for (const instant of [
    "2024-05-15T12:00:00Z",
    "2024-05-15T23:00:00Z",
    "2024-05-14T23:00:00Z",
    "2024-05-15T00:00:00Z",
  ]) {
    const cached = periodOf(period, new Date(instant));
    const fresh = periodOf(parsed(t, "0 0 * * *"), new Date(instant));
    t.deepEqual(cached, fresh, instant);
  }
  const held = periodOf(period, new Date("2024-05-15T12:00:00Z"));
  held.start.setTime(0);
  t.is(periodOf(period, new Date("2024-05-15T13:00:00Z")).start.toISOString(), "2024-05-15T00:00:00.000Z");
});

test("H in a cron expression picks the same time on every parse", (t) => {
  const instant = new Date("2024-05-15T12:00:00Z");
  const first = periodOf(parsed(t, "H H * * *"), instant);
  for (let i = 0; i < 5; i++) t.deepEqual(periodOf(parsed(t, "H H * * *"), instant), first);
});

test("start <= t < end over many random instants, for every kind of period", (t) => {
  const texts = [
    "",
    "P1M",
    "P3M",
    "P1Y",
    "P7M",
    "P1W",
    "P3W",
    "P1D",
    "P5D",
    "PT1H",
    "PT7M",
    "PT1S",
    "P1DT12H",
    "PT1H30M",
    "0 0 1 * *",
    "0 */6 * * *",
    "*/7 * * * * *",
    "0 0 * * 1",
    "15 3 L * *",
  ];
  const from = Date.UTC(1950, 0, 1);
  const to = Date.UTC(2150, 0, 1);
  for (const text of texts) {
    const period = parsed(t, text);
    let previousEnd = 0;
    for (let i = 0; i < 400; i++) {
      // Half the instants land on the previous period's end: exactly on a boundary.
      const at = i % 2 === 1 ? previousEnd : from + Math.floor(Math.random() * (to - from));
      const { start, end } = periodOf(period, new Date(at));
      if (!(start.getTime() <= at && at < end.getTime()))
        t.fail(`${text}: ${new Date(at).toISOString()} outside ${start.toISOString()}..${end.toISOString()}`);
      t.deepEqual(periodOf(period, start), { start, end }, `${text}: the start is in its own period`);
      previousEnd = end.getTime();
    }
  }
  t.pass();
});

test("a period does not depend on the instants asked before", (t) => {
  const instants = Array.from({ length: 200 }, () => Date.UTC(2000, 0, 1) + Math.floor(Math.random() * 50 * 365 * DAY));
  for (const text of ["0 0 1 * *", "0 */6 * * *", "P3M", "P1W"]) {
    const shared = parsed(t, text);
    for (const at of instants) t.deepEqual(periodOf(shared, new Date(at)), periodOf(parsed(t, text), new Date(at)));
  }
});

test("refuses zero, negative and fractional counts", (t) => {
  t.regex(refusal("P0M"), /at least 1/);
  t.regex(refusal("PT0S"), /at least 1/);
  t.regex(refusal("P1DT0H"), /at least 1/);
  t.regex(refusal("-P1M"), /negative/);
  t.regex(refusal("P-1D"), /negative/);
  t.regex(refusal("P1.5D"), /whole units/);
  t.regex(refusal("PT0,5H"), /whole units/);
  t.regex(refusal("PT0.5S"), /whole units/);
});

test("refuses years or months mixed with other units", (t) => {
  for (const text of ["P1Y6M", "P1M1D", "P1YT1H", "P1MT1S", "P1Y1W"])
    t.regex(refusal(text), /cannot combine years or months/, text);
});

test("refuses text that is neither a duration nor a cron expression, naming the forms accepted", (t) => {
  for (const text of [
    "monthly",
    "1 month",
    "P",
    "PT",
    "P1DT",
    "P1H",
    "PT1D",
    "P1M1Y",
    "30d",
    "* * *",
    "* * * * * * *",
  ]) {
    const problem = refusal(text);
    t.not(problem, "accepted", text);
    t.true(problem.includes("P1M") && problem.includes("cron"), `${text}: ${problem}`);
  }
});

test("refuses invalid cron expressions and ones that never fire, giving the reason", (t) => {
  t.regex(refusal("61 * * * *"), /not a valid cron expression \(.*61.*\)/);
  t.regex(refusal("0 0 30 2 *"), /not a valid cron expression/);
  t.regex(refusal("0 0 1 13 *"), /not a valid cron expression/);
  t.regex(refusal("@fortnightly"), /not a valid cron expression/);
});

test("refuses periods longer than 100 years", (t) => {
  t.is(refusal("P100Y"), "accepted");
  t.is(refusal("P1200M"), "accepted");
  t.regex(refusal("P101Y"), /100 years/);
  t.regex(refusal("P1201M"), /100 years/);
  t.regex(refusal("P36526D"), /100 years/);
  t.regex(refusal("PT99999999999999999999S"), /100 years/);
});

test("the longest periods still hold the instant", (t) => {
  const instant = new Date("2024-05-15T00:00:00Z");
  t.deepEqual(span(t, "P100Y", instant.toISOString()), ["1970-01-01T00:00:00.000Z", "2070-01-01T00:00:00.000Z"]);
  const { start, end } = periodOf(parsed(t, "P36525D"), instant);
  t.true(start <= instant && instant < end);
});
