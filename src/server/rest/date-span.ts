/** A google.protobuf.Duration: `seconds` and `nanos` have the same sign and |nanos| < 1e9. */
export interface Span {
  seconds: bigint;
  nanos: number;
}

const NANOS_PER_SECOND = 1_000_000_000n;
const NANOS_PER_TICK = 100n;
const TICKS_PER_SECOND = 10_000_000n;
const SECONDS_PER_MINUTE = 60n;
const SECONDS_PER_HOUR = 3_600n;
const SECONDS_PER_DAY = 86_400n;
const SECONDS_PER_WEEK = 604_800n;
/** The protobuf Duration range: about 10,000 years. */
const MAX_SECONDS = 315_576_000_000n;
/** Far longer than any valid duration; keeps BigInt conversions of digit runs cheap. */
const MAX_INPUT_LENGTH = 100;

const ACCEPTED_FORMS =
  'expected a .NET TimeSpan "[-][d.]hh:mm[:ss[.fffffff]]" such as "1.02:30:00", ' +
  'an ISO 8601 duration "[-]P[nW][nD][T[nH][nM][n[.f]S]]" such as "PT1H30M", ' +
  'or seconds "[-]n[.f]s" such as "90.5s"';

const TIME_SPAN = /^(-)?(?:(\d+)\.)?(\d+):(\d+)(?::(\d+)(?:\.(\d{1,7}))?)?$/;
const ISO_DURATION = /^(-)?P(?:(\d+)W)?(?:(\d+)D)?(?:(T)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?$/i;
const PROTO_SECONDS = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/;

/** Formats as a .NET TimeSpan in the constant ("c") format: `[-][d.]hh:mm:ss[.fffffff]`. */
export function formatTimeSpan(span: Span): string {
  const total = span.seconds * NANOS_PER_SECOND + BigInt(span.nanos);
  // Sub-tick nanos are truncated, so a span shorter than one tick formats as zero, without a sign.
  const ticks = (total < 0n ? -total : total) / NANOS_PER_TICK;
  const totalSeconds = ticks / TICKS_PER_SECOND;
  const fraction = ticks % TICKS_PER_SECOND;
  const days = totalSeconds / SECONDS_PER_DAY;
  const hours = (totalSeconds % SECONDS_PER_DAY) / SECONDS_PER_HOUR;
  const minutes = (totalSeconds % SECONDS_PER_HOUR) / SECONDS_PER_MINUTE;
  const seconds = totalSeconds % SECONDS_PER_MINUTE;

  let text = total < 0n && ticks > 0n ? "-" : "";
  if (days > 0n) text += `${days}.`;
  text += `${pad2(hours)}:${pad2(minutes)}:${pad2(seconds)}`;
  if (fraction > 0n) text += `.${fraction.toString().padStart(7, "0")}`;
  return text;
}

/**
 * Parses a .NET TimeSpan (`[-][d.]hh:mm[:ss[.fffffff]]`), an ISO 8601 duration without years or months
 * (`[-]P[nW][nD][T[nH][nM][n[.f]S]]`) or a protobuf JSON duration (`[-]n[.f]s`). Throws a plain Error whose
 * message does not name the field.
 */
export function parseDateSpan(text: string): Span {
  const input = text.trim();
  if (input === "") throw new Error(`duration is empty; ${ACCEPTED_FORMS}`);
  if (input.length > MAX_INPUT_LENGTH) throw new Error(`duration is longer than ${MAX_INPUT_LENGTH} characters`);

  const nanos = parseTimeSpan(input) ?? parseIsoDuration(input) ?? parseProtoSeconds(input);
  if (nanos === undefined) {
    if (/^[+-]?\d+$/.test(input)) {
      throw new Error(`bare number ${JSON.stringify(input)} is ambiguous (days or seconds?); ${ACCEPTED_FORMS}`);
    }
    throw new Error(`unrecognized duration ${JSON.stringify(input)}; ${ACCEPTED_FORMS}`);
  }
  return toSpan(nanos);
}

function parseTimeSpan(input: string): bigint | undefined {
  const match = TIME_SPAN.exec(input);
  if (!match) return undefined;
  const [, minus, days, hours, minutes, seconds, fraction] = match;
  const quoted = JSON.stringify(input);
  if (days !== undefined && (hours.length > 2 || Number(hours) > 23)) {
    throw new Error(`hours must be 00-23 when days are given, in TimeSpan ${quoted}`);
  }
  if (minutes.length > 2 || Number(minutes) > 59) throw new Error(`minutes must be 00-59 in TimeSpan ${quoted}`);
  if (seconds !== undefined && (seconds.length > 2 || Number(seconds) > 59)) {
    throw new Error(`seconds must be 00-59 in TimeSpan ${quoted}`);
  }
  const wholeSeconds =
    BigInt(days ?? "0") * SECONDS_PER_DAY +
    BigInt(hours) * SECONDS_PER_HOUR +
    BigInt(minutes) * SECONDS_PER_MINUTE +
    BigInt(seconds ?? "0");
  return signed(minus, wholeSeconds * NANOS_PER_SECOND + fractionNanos(fraction));
}

function parseIsoDuration(input: string): bigint | undefined {
  if (!/^-?P/i.test(input)) return undefined;
  const match = ISO_DURATION.exec(input);
  const quoted = JSON.stringify(input);
  if (!match) {
    const datePart = input.replace(/^-?P/i, "").split(/T/i)[0];
    if (/[YM]/i.test(datePart)) {
      throw new Error(
        `ISO 8601 duration ${quoted} has years or months, which are not supported because their length is not fixed; ` +
          'use weeks, days, hours, minutes and seconds ("PT1M" is one minute)',
      );
    }
    throw new Error(
      `invalid ISO 8601 duration ${quoted}; expected "[-]P[nW][nD][T[nH][nM][n[.f]S]]" such as "P1DT2H30M" ` +
        "(only seconds may have a fraction, of at most 9 digits)",
    );
  }
  const [, minus, weeks, days, timeDesignator, hours, minutes, seconds, fraction] = match;
  const hasTime = hours !== undefined || minutes !== undefined || seconds !== undefined;
  if (timeDesignator !== undefined && !hasTime) {
    throw new Error(`ISO 8601 duration ${quoted} has a "T" with no hours, minutes or seconds after it`);
  }
  if (!hasTime && weeks === undefined && days === undefined) {
    throw new Error(`ISO 8601 duration ${quoted} has no components; expected e.g. "PT0S" or "P1D"`);
  }
  const wholeSeconds =
    BigInt(weeks ?? "0") * SECONDS_PER_WEEK +
    BigInt(days ?? "0") * SECONDS_PER_DAY +
    BigInt(hours ?? "0") * SECONDS_PER_HOUR +
    BigInt(minutes ?? "0") * SECONDS_PER_MINUTE +
    BigInt(seconds ?? "0");
  return signed(minus, wholeSeconds * NANOS_PER_SECOND + fractionNanos(fraction));
}

function parseProtoSeconds(input: string): bigint | undefined {
  const match = PROTO_SECONDS.exec(input);
  if (!match) return undefined;
  const [, minus, seconds, fraction] = match;
  return signed(minus, BigInt(seconds) * NANOS_PER_SECOND + fractionNanos(fraction));
}

function toSpan(totalNanos: bigint): Span {
  // BigInt division truncates toward zero, so seconds and nanos keep the same sign.
  const seconds = totalNanos / NANOS_PER_SECOND;
  if (seconds > MAX_SECONDS || seconds < -MAX_SECONDS) {
    throw new Error(`duration is out of range: at most ${MAX_SECONDS} seconds (about 10,000 years) either way`);
  }
  return { seconds, nanos: Number(totalNanos % NANOS_PER_SECOND) };
}

/** Fraction digits (up to 9) as nanoseconds, exactly. */
function fractionNanos(digits: string | undefined): bigint {
  return digits === undefined ? 0n : BigInt(digits.padEnd(9, "0"));
}

function signed(minus: string | undefined, nanos: bigint): bigint {
  return minus === undefined ? nanos : -nanos;
}

function pad2(value: bigint): string {
  return value.toString().padStart(2, "0");
}
