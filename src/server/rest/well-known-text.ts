import { formatTimeSpan } from "./date-span.js";

const MAX_DURATION_SECONDS = 315_576_000_000n;
const MIN_TIMESTAMP_MS = Date.parse("0001-01-01T00:00:00Z");
const MAX_TIMESTAMP_MS = Date.parse("9999-12-31T23:59:59Z");
const TWO_DIGITS = Array.from({ length: 60 }, (_, value) => String(value).padStart(2, "0"));

/** A google.protobuf.Duration or Timestamp as a message holds it. */
export interface Span {
  seconds: unknown;
  nanos: number;
}

/** A .NET TimeSpan as a JSON string, or undefined for a duration toJson would refuse. */
export function durationText({ seconds, nanos }: Span): string | undefined {
  if (typeof seconds !== "bigint" || !Number.isInteger(nanos) || nanos <= -1e9 || nanos >= 1e9) return undefined;
  if (seconds > MAX_DURATION_SECONDS || seconds < -MAX_DURATION_SECONDS) return undefined;
  if ((seconds > 0n && nanos < 0) || (seconds < 0n && nanos > 0)) return undefined;
  return `"${formatTimeSpan({ seconds, nanos })}"`;
}

/** An RFC 3339 UTC time as a JSON string, as protobuf-es writes it; undefined for one toJson would refuse. */
export function timestampText({ seconds, nanos }: Span): string | undefined {
  if (typeof seconds !== "bigint" || !Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) return undefined;
  const ms = Number(seconds) * 1000;
  if (ms < MIN_TIMESTAMP_MS || ms > MAX_TIMESTAMP_MS) return undefined;
  const iso = utcDateTime(Number(seconds));
  if (nanos === 0) return `"${iso}Z"`;
  const digits = String(nanos + 1_000_000_000).slice(1);
  const fraction = digits.endsWith("000000")
    ? digits.slice(0, 3)
    : digits.endsWith("000")
      ? digits.slice(0, 6)
      : digits;
  return `"${iso}.${fraction}Z"`;
}

/**
 * `YYYY-MM-DDTHH:MM:SS` of seconds since the epoch, as Date#toISOString writes years 1 to 9999 (proleptic
 * Gregorian calendar), without building a Date: days to a civil date by Howard Hinnant's algorithm.
 */
function utcDateTime(epochSeconds: number): string {
  const days = Math.floor(epochSeconds / 86_400);
  const secondOfDay = epochSeconds - days * 86_400;
  const shifted = days + 719_468;
  const era = Math.floor(shifted / 146_097);
  const dayOfEra = shifted - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1_460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1;
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hour = Math.floor(secondOfDay / 3_600);
  const minute = Math.floor((secondOfDay % 3_600) / 60);
  const time = `${TWO_DIGITS[hour]}:${TWO_DIGITS[minute]}:${TWO_DIGITS[secondOfDay % 60]}`;
  return `${String(year).padStart(4, "0")}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]}T${time}`;
}
