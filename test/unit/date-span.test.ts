import test from "ava";
import { formatTimeSpan, parseDateSpan, type Span } from "../../src/server/rest/date-span.js";

function span(seconds: bigint, nanos = 0): Span {
  return { seconds, nanos };
}

test("formatTimeSpan: brief examples", (t) => {
  t.is(formatTimeSpan(span(0n)), "00:00:00");
  t.is(formatTimeSpan(span(90n)), "00:01:30");
  t.is(formatTimeSpan(span(2n * 86_400n + 3n * 3_600n)), "2.03:00:00");
  t.is(formatTimeSpan(span(1n, 500_000_000)), "00:00:01.5000000");
  t.is(formatTimeSpan(span(-90n)), "-00:01:30");
});

test("formatTimeSpan: days only from one day up", (t) => {
  t.is(formatTimeSpan(span(86_399n)), "23:59:59");
  t.is(formatTimeSpan(span(86_400n)), "1.00:00:00");
  t.is(formatTimeSpan(span(-86_400n)), "-1.00:00:00");
  t.is(formatTimeSpan(span(123n * 86_400n + 4n * 3_600n + 5n * 60n + 6n)), "123.04:05:06");
});

test("formatTimeSpan: fraction is 7 digits of 100 ns ticks, sub-tick nanos truncated", (t) => {
  t.is(formatTimeSpan(span(0n, 100)), "00:00:00.0000001");
  t.is(formatTimeSpan(span(0n, 199)), "00:00:00.0000001");
  t.is(formatTimeSpan(span(0n, 999_999_999)), "00:00:00.9999999");
  t.is(formatTimeSpan(span(5n, 120_000_000)), "00:00:05.1200000");
  t.is(formatTimeSpan(span(-5n, -120_000_000)), "-00:00:05.1200000");
  t.is(formatTimeSpan(span(0n, -500_000_000)), "-00:00:00.5000000");
});

test("formatTimeSpan: spans shorter than a tick format as zero without a sign", (t) => {
  t.is(formatTimeSpan(span(0n, 99)), "00:00:00");
  t.is(formatTimeSpan(span(0n, -99)), "00:00:00");
  t.is(formatTimeSpan(span(3n, 50)), "00:00:03");
});

test("formatTimeSpan: the protobuf Duration extremes", (t) => {
  t.is(formatTimeSpan(span(315_576_000_000n, 999_999_999)), "3652500.00:00:00.9999999");
  t.is(formatTimeSpan(span(-315_576_000_000n, -999_999_999)), "-3652500.00:00:00.9999999");
});

test("parseDateSpan: .NET TimeSpan", (t) => {
  t.deepEqual(parseDateSpan("00:00:00"), span(0n));
  t.deepEqual(parseDateSpan("00:01:30"), span(90n));
  t.deepEqual(parseDateSpan("2.03:00:00"), span(183_600n));
  t.deepEqual(parseDateSpan("00:00:01.5000000"), span(1n, 500_000_000));
  t.deepEqual(parseDateSpan("-00:01:30"), span(-90n));
  t.deepEqual(parseDateSpan("-1.02:03:04.0000005"), span(-93_784n, -500));
  t.deepEqual(parseDateSpan("3652499.23:59:59.9999999"), span(315_575_999_999n, 999_999_900));
});

test("parseDateSpan: TimeSpan without seconds, with short fields and short fractions", (t) => {
  t.deepEqual(parseDateSpan("01:30"), span(5_400n));
  t.deepEqual(parseDateSpan("1.01:30"), span(91_800n));
  t.deepEqual(parseDateSpan("1:2:3"), span(3_723n));
  t.deepEqual(parseDateSpan("00:00:00.1"), span(0n, 100_000_000));
  t.deepEqual(parseDateSpan("00:00:00.123"), span(0n, 123_000_000));
  t.deepEqual(parseDateSpan("-00:00:00.25"), span(0n, -250_000_000));
});

test("parseDateSpan: TimeSpan hours may exceed 23 only without days", (t) => {
  t.deepEqual(parseDateSpan("36:00:00"), span(129_600n));
  t.deepEqual(parseDateSpan("100:00"), span(360_000n));
  t.throws(() => parseDateSpan("1.24:00:00"), { message: /hours must be 00-23/ });
  t.throws(() => parseDateSpan("1.123:00"), { message: /hours must be 00-23/ });
});

test("parseDateSpan: TimeSpan minutes and seconds must be 0-59", (t) => {
  t.throws(() => parseDateSpan("00:60:00"), { message: /minutes must be 00-59/ });
  t.throws(() => parseDateSpan("00:00:60"), { message: /seconds must be 00-59/ });
  t.throws(() => parseDateSpan("00:000:00"), { message: /minutes must be 00-59/ });
  t.throws(() => parseDateSpan("00:00:001"), { message: /seconds must be 00-59/ });
});

test("parseDateSpan: malformed TimeSpans", (t) => {
  for (const text of [
    "00:00:00.12345678",
    "00:00:00.",
    "00:00.5",
    "1.",
    ".01:00",
    "1.2.03:00",
    "00:00:00:00",
    "+00:01:30",
    "--00:01:30",
    "00: 01:30",
    "１:00",
  ]) {
    t.throws(() => parseDateSpan(text), { message: /unrecognized duration/ }, text);
  }
});

test("parseDateSpan: ISO 8601 durations", (t) => {
  t.deepEqual(parseDateSpan("PT0S"), span(0n));
  t.deepEqual(parseDateSpan("P1D"), span(86_400n));
  t.deepEqual(parseDateSpan("P2W"), span(1_209_600n));
  t.deepEqual(parseDateSpan("P1W2D"), span(777_600n));
  t.deepEqual(parseDateSpan("PT1H"), span(3_600n));
  t.deepEqual(parseDateSpan("PT1M"), span(60n));
  t.deepEqual(parseDateSpan("PT90M"), span(5_400n));
  t.deepEqual(parseDateSpan("PT1.5S"), span(1n, 500_000_000));
  t.deepEqual(parseDateSpan("PT0,25S"), span(0n, 250_000_000));
  t.deepEqual(parseDateSpan("PT0.000000001S"), span(0n, 1));
  t.deepEqual(parseDateSpan("P1DT2H3M4.5S"), span(93_784n, 500_000_000));
  t.deepEqual(parseDateSpan("-PT1M30S"), span(-90n));
  t.deepEqual(parseDateSpan("-PT0.5S"), span(0n, -500_000_000));
  t.deepEqual(parseDateSpan("p1dt1h"), span(90_000n));
});

test("parseDateSpan: ISO 8601 years and months are rejected because their length is not fixed", (t) => {
  for (const text of ["P1Y", "P1M", "P1Y2M3D", "P1YT1H", "-P2M", "P0.5Y", "P1M1D"]) {
    t.throws(() => parseDateSpan(text), { message: /years or months.*length is not fixed/ }, text);
  }
});

test("parseDateSpan: malformed ISO 8601 durations", (t) => {
  t.throws(() => parseDateSpan("P"), { message: /no components/ });
  t.throws(() => parseDateSpan("-P"), { message: /no components/ });
  t.throws(() => parseDateSpan("PT"), { message: /"T" with no hours/ });
  t.throws(() => parseDateSpan("P1DT"), { message: /"T" with no hours/ });
  for (const text of [
    "P1H",
    "PT1D",
    "PT1.5H",
    "PT1.5M",
    "P1.5D",
    "PT1S2M",
    "P1D1W",
    "PT1.0000000001S",
    "P-1D",
    "+P1D",
  ]) {
    t.throws(() => parseDateSpan(text), { message: /ISO 8601|unrecognized duration/ }, text);
  }
  t.throws(() => parseDateSpan("PT1.5H"), { message: /only seconds may have a fraction/ });
});

test("parseDateSpan: protobuf JSON seconds", (t) => {
  t.deepEqual(parseDateSpan("0s"), span(0n));
  t.deepEqual(parseDateSpan("3600s"), span(3_600n));
  t.deepEqual(parseDateSpan("90.5s"), span(90n, 500_000_000));
  t.deepEqual(parseDateSpan("1.000000001s"), span(1n, 1));
  t.deepEqual(parseDateSpan("-1.5s"), span(-1n, -500_000_000));
  t.deepEqual(parseDateSpan("-0.000000001s"), span(0n, -1));
  t.deepEqual(parseDateSpan("-0s"), span(0n));
});

test("parseDateSpan: fractions are exact, never float-rounded", (t) => {
  t.deepEqual(parseDateSpan("0.1s"), span(0n, 100_000_000));
  t.deepEqual(parseDateSpan("0.3s"), span(0n, 300_000_000));
  t.deepEqual(parseDateSpan("315575999999.999999999s"), span(315_575_999_999n, 999_999_999));
  t.deepEqual(parseDateSpan("00:00:00.0000001"), span(0n, 100));
  t.deepEqual(parseDateSpan("PT4.035S"), span(4n, 35_000_000));
});

test("parseDateSpan: malformed protobuf seconds", (t) => {
  for (const text of ["1.5", "1.s", ".5s", "1.0000000001s", "1 s", "1S", "1e3s", "0x10s", "s"]) {
    t.throws(() => parseDateSpan(text), { message: /unrecognized duration|bare number/ }, text);
  }
});

test("parseDateSpan: trims surrounding whitespace", (t) => {
  t.deepEqual(parseDateSpan("  00:01:30\t"), span(90n));
  t.deepEqual(parseDateSpan("\nPT1M "), span(60n));
  t.deepEqual(parseDateSpan(" 5s "), span(5n));
});

test("parseDateSpan: a bare integer is ambiguous", (t) => {
  for (const text of ["5", "-5", "+5", "0", " 12 "]) {
    t.throws(() => parseDateSpan(text), { message: /bare number .* is ambiguous/ }, text);
  }
});

test("parseDateSpan: empty, garbage and overlong input name the accepted forms", (t) => {
  t.throws(() => parseDateSpan(""), { message: /empty.*TimeSpan.*ISO 8601.*seconds/ });
  t.throws(() => parseDateSpan("   "), { message: /empty/ });
  for (const text of ["soon", "1 day", "1d", "01h30m", "NaN", "Infinity", "-", "1:", ":30", "00:01:30; DROP TABLE x"]) {
    t.throws(() => parseDateSpan(text), { message: /unrecognized duration.*TimeSpan.*ISO 8601.*seconds/ }, text);
  }
  t.throws(() => parseDateSpan(`${"0".repeat(200)}1s`), { message: /longer than 100 characters/ });
});

test("parseDateSpan: the protobuf Duration range is enforced", (t) => {
  t.deepEqual(parseDateSpan("315576000000s"), span(315_576_000_000n));
  t.deepEqual(parseDateSpan("-315576000000s"), span(-315_576_000_000n));
  t.deepEqual(parseDateSpan("315576000000.999999999s"), span(315_576_000_000n, 999_999_999));
  t.deepEqual(parseDateSpan("3652500.00:00:00"), span(315_576_000_000n));
  t.throws(() => parseDateSpan("315576000001s"), { message: /out of range/ });
  t.throws(() => parseDateSpan("-315576000001s"), { message: /out of range/ });
  t.throws(() => parseDateSpan("3652500.00:00:01"), { message: /out of range/ });
  // .NET TimeSpan.MaxValue is longer than a protobuf Duration can hold.
  t.throws(() => parseDateSpan("10675199.02:48:05.4775807"), { message: /out of range/ });
  t.throws(() => parseDateSpan("P521786W"), { message: /out of range/ });
  t.throws(() => parseDateSpan("99999999999999999999999:00"), { message: /out of range/ });
});

test("round trip: format(parse(x)) === x for canonical TimeSpans", (t) => {
  for (const text of [
    "00:00:00",
    "00:00:01",
    "00:01:30",
    "23:59:59",
    "1.00:00:00",
    "2.03:00:00",
    "00:00:01.5000000",
    "00:00:00.0000001",
    "00:00:00.9999999",
    "-00:01:30",
    "-1.02:03:04.0000005",
    "3652499.23:59:59.9999999",
    "3652500.00:00:00",
    "-3652500.00:00:00",
  ]) {
    t.is(formatTimeSpan(parseDateSpan(text)), text);
  }
});

test("round trip: other forms normalize to the canonical TimeSpan", (t) => {
  t.is(formatTimeSpan(parseDateSpan("PT90M")), "01:30:00");
  t.is(formatTimeSpan(parseDateSpan("P1W")), "7.00:00:00");
  t.is(formatTimeSpan(parseDateSpan("36:00")), "1.12:00:00");
  t.is(formatTimeSpan(parseDateSpan("3600s")), "01:00:00");
  t.is(formatTimeSpan(parseDateSpan("-0.25s")), "-00:00:00.2500000");
  t.is(formatTimeSpan(parseDateSpan("00:00:00.5")), "00:00:00.5000000");
});

test("round trip: parse(format(span)) === span for tick-aligned spans", (t) => {
  for (const value of [span(0n), span(1n, 100), span(-7n, -999_999_900), span(86_400n * 365n + 1n, 123_456_700)]) {
    t.deepEqual(parseDateSpan(formatTimeSpan(value)), value);
  }
});
