import { type CronExpression, CronExpressionParser } from "cron-parser";

/** A metered asset's consumption period, parsed once; periodOf says which period an instant falls in. */
export type ConsumptionPeriod = CalendarMonths | FixedLength | CronBoundaries;

/** n calendar months in UTC, starting at month indexes (counted from 1970-01) that are multiples of n. */
interface CalendarMonths {
  readonly kind: "months";
  readonly months: number;
}

/** Periods of one length, one of them starting at `originMs`. */
interface FixedLength {
  readonly kind: "fixed";
  readonly lengthMs: number;
  readonly originMs: number;
}

/** Periods from one fire time of a UTC cron expression to the next; the last one found is kept. */
interface CronBoundaries {
  readonly kind: "cron";
  readonly expression: CronExpression;
  last: { startMs: number; endMs: number } | undefined;
}

export interface Period {
  start: Date;
  end: Date;
}

const SECOND_MS = 1000;
const DAY_MS = 86_400 * SECOND_MS;
/** Monday 1969-12-29 00:00 UTC: weeks are ISO weeks. */
const FIRST_MONDAY_MS = -3 * DAY_MS;
const MAX_MONTHS = 1200;
const MAX_FIXED_MS = 36_525 * DAY_MS;
/** An instant the cron probe starts from: an expression must fire around it. */
const PROBE_INSTANT = new Date(Date.UTC(2000, 0, 1));

const FORMS =
  "use an ISO 8601 duration in whole units (P1M, P3M, P1Y, P2W, P1D, PT1H, P1DT12H), " +
  "a cron expression of 5 or 6 fields evaluated in UTC (0 0 1 * *), or nothing for calendar months";
const TOO_LONG = "is longer than the longest period allowed, 100 years";
const DURATION = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;
const UNIT_MS = [0, 0, 7 * DAY_MS, DAY_MS, 3600 * SECOND_MS, 60 * SECOND_MS, SECOND_MS];

/**
 * A consumption period from its text: empty for one calendar month, an ISO 8601 duration (P1M, P3M, P1Y, P1W,
 * P1D, PT1H, P1DT12H) aligned on the UTC calendar, or a cron expression whose fire times (UTC) end the periods.
 */
export function parseConsumptionPeriod(text: string): ConsumptionPeriod | { problem: string } {
  const trimmed = text.trim();
  if (trimmed === "") return { kind: "months", months: 1 };
  if (/^[-+]?P/i.test(trimmed) && !/\s/.test(trimmed)) return parseDuration(trimmed.toUpperCase());
  const fields = trimmed.split(/\s+/).length;
  if (trimmed.startsWith("@") || fields === 5 || fields === 6) return parseCron(trimmed);
  return { problem: `is neither a duration nor a cron expression: ${FORMS}` };
}

/** The period holding `instant`: start <= instant < end. */
export function periodOf(period: ConsumptionPeriod, instant: Date): Period {
  const at = instant.getTime();
  if (period.kind === "months") return monthsHolding(period.months, instant);
  if (period.kind === "fixed") {
    const startMs = period.originMs + Math.floor((at - period.originMs) / period.lengthMs) * period.lengthMs;
    return { start: new Date(startMs), end: new Date(startMs + period.lengthMs) };
  }
  const last = period.last;
  if (!last || at < last.startMs || at >= last.endMs) period.last = cronPeriodHolding(period.expression, instant);
  const { startMs, endMs } = period.last as { startMs: number; endMs: number };
  return { start: new Date(startMs), end: new Date(endMs) };
}

function monthsHolding(months: number, instant: Date): Period {
  const index = (instant.getUTCFullYear() - 1970) * 12 + instant.getUTCMonth();
  const first = Math.floor(index / months) * months;
  return { start: new Date(Date.UTC(1970, first, 1)), end: new Date(Date.UTC(1970, first + months, 1)) };
}

function cronPeriodHolding(expression: CronExpression, instant: Date): { startMs: number; endMs: number } {
  expression.reset(instant);
  const end = expression.next().toDate();
  expression.reset(end);
  return { startMs: expression.prev().getTime(), endMs: end.getTime() };
}

function parseDuration(text: string): ConsumptionPeriod | { problem: string } {
  if (/[-+]/.test(text)) return { problem: `must not be negative: ${FORMS}` };
  if (/[.,]/.test(text)) return { problem: `must count whole units, without fractions: ${FORMS}` };
  const match = DURATION.exec(text);
  if (!match || match.slice(1).every((count) => count === undefined)) {
    return { problem: `is not an ISO 8601 duration: ${FORMS}` };
  }
  const counts = match.slice(1).map((count) => (count === undefined ? undefined : Number(count)));
  if (counts.some((count) => count === 0)) return { problem: `must count at least 1 of each unit it names: ${FORMS}` };
  const [years, months] = counts;
  const named = counts.filter((count) => count !== undefined).length;
  if ((years !== undefined || months !== undefined) && named > 1) {
    return { problem: `cannot combine years or months with other units (use P1Y or P18M alone): ${FORMS}` };
  }
  if (years !== undefined || months !== undefined) {
    const total = years !== undefined ? years * 12 : (months as number);
    return total > MAX_MONTHS ? { problem: TOO_LONG } : { kind: "months", months: total };
  }
  const lengthMs = counts.reduce<number>((sum, count, unit) => sum + (count ?? 0) * UNIT_MS[unit], 0);
  if (lengthMs > MAX_FIXED_MS) return { problem: TOO_LONG };
  const weeksAlone = counts[2] !== undefined && named === 1;
  return { kind: "fixed", lengthMs, originMs: weeksAlone ? FIRST_MONDAY_MS : 0 };
}

function parseCron(text: string): ConsumptionPeriod | { problem: string } {
  let expression: CronExpression;
  try {
    // A fixed seed makes `H` pick the same time on every instance.
    expression = CronExpressionParser.parse(text, { tz: "UTC", hashSeed: text });
  } catch (error) {
    return { problem: `is not a valid cron expression (${(error as Error).message}): ${FORMS}` };
  }
  const period: ConsumptionPeriod = { kind: "cron", expression, last: undefined };
  try {
    periodOf(period, PROBE_INSTANT);
  } catch {
    return { problem: `is a cron expression that never fires: ${FORMS}` };
  }
  return period;
}
