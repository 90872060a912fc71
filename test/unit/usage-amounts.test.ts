import test from "ava";
import {
  fromMicro,
  MAX_AMOUNT_UNITS,
  MAX_EXACT_TOTAL_MICRO,
  MICRO_PER_UNIT,
  parseUsageAmount,
  toMicro,
} from "../../src/usage/usage-amounts.js";

/** The micro-units a decimal text means, worked out on its digits (half up at the 7th decimal). */
function microOfText(text: string): bigint {
  const [whole, fraction = ""] = text.split(".");
  const padded = fraction.padEnd(7, "0");
  const micro = BigInt(whole) * 1_000_000n + BigInt(padded.slice(0, 6));
  return padded[6] >= "5" ? micro + 1n : micro;
}

function randomDecimal(decimals: number): string {
  const whole = Math.floor(Math.random() * 10 ** Math.floor(Math.random() * 10));
  const fraction = String(Math.floor(Math.random() * 10 ** decimals)).padStart(decimals, "0");
  return `${Math.min(whole, MAX_AMOUNT_UNITS - 1)}.${fraction}`;
}

test("toMicro gives the exact micro-units of decimals that doubles cannot hold", (t) => {
  t.is(toMicro(0.1), 100_000);
  t.is(toMicro(12.345678), 12_345_678);
  t.is(toMicro(4.35), 4_350_000);
  t.is(toMicro(1.005), 1_005_000);
  t.not(1.005 * MICRO_PER_UNIT, 1_005_000, "the float product is 1004999.9999999999");
  t.is(toMicro(0.1 + 0.2), 300_000);
  t.is(toMicro(999_999_999.999999), 999_999_999_999_999);
  t.is(toMicro(0), 0);
  t.true(Object.is(toMicro(-0), 0), "negative zero comes back as 0");
});

test("toMicro reaches MAX_AMOUNT_UNITS exactly and refuses past it", (t) => {
  t.is(MAX_AMOUNT_UNITS, 1_000_000_000);
  t.is(toMicro(1e9), 1e15);
  t.is(toMicro(MAX_AMOUNT_UNITS + 0.000001), undefined);
  t.is(toMicro(2e9), undefined);
  t.is(toMicro(1_000_000_000.0000004), 1e15, "checked once rounded: it rounds to the largest amount");
  t.deepEqual(parseUsageAmount("1000000000.0000004"), { micro: 1e15 });
  t.deepEqual(parseUsageAmount('{"amount":1000000000.0000004}'), { micro: 1e15 });
  t.true("problem" in parseUsageAmount("1000000000.0000005"));
});

test("toMicro rounds the 7th decimal half up on the number as written", (t) => {
  t.is(toMicro(0.0000005), 1);
  t.is(toMicro(0.00000049), 0);
  t.is(toMicro(0.00000025), 0);
  t.is(toMicro(0.0000015), 2);
  t.is(toMicro(0.0000055), 6);
  t.is(toMicro(1e-7), 0);
  t.is(toMicro(9.9e-7), 1);
  t.is(toMicro(1e-300), 0);
  t.is(toMicro(1.0000005), 1_000_001);
  t.is(toMicro(523.6407145), 523_640_715, "Math.round(value * 1e6) gives 523640714 here");
  t.is(toMicro(1.4999995), 1_500_000);
});

test("toMicro refuses NaN, infinities and negatives", (t) => {
  for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1, -0.000001, -1e-300]) {
    t.is(toMicro(value), undefined, String(value));
  }
});

test("toMicro agrees with the digits of random decimals of up to 6 places and with Math.round on them", (t) => {
  for (let i = 0; i < 20_000; i++) {
    const text = randomDecimal(1 + (i % 6));
    const value = Number(text);
    t.is(BigInt(toMicro(value) as number), microOfText(text), text);
    if (toMicro(value) !== Math.round(value * MICRO_PER_UNIT)) t.fail(`${text} differs from Math.round`);
  }
});

test("toMicro rounds random 7-decimal ties up, as the digits say", (t) => {
  for (let i = 0; i < 20_000; i++) {
    const text = `${randomDecimal(6)}5`;
    if (String(Number(text)) !== text) continue; // beyond 17 significant digits: the double is not this decimal
    t.is(BigInt(toMicro(Number(text)) as number), microOfText(text), text);
  }
});

test("fromMicro turns micro-units back into units", (t) => {
  t.is(fromMicro(12_500_000), 12.5);
  t.is(fromMicro(1), 0.000001);
  t.is(fromMicro(0), 0);
  t.is(fromMicro(123_456_789), 123.456789);
});

test("micro-unit totals stay exact where a sum of doubles drifts", (t) => {
  let doubles = 0;
  let micro = 0;
  for (let i = 0; i < 1000; i++) {
    doubles += 0.1;
    micro += toMicro(0.1) as number;
  }
  t.not(doubles, 100);
  t.is(micro, 100 * MICRO_PER_UNIT);
  t.is(MAX_EXACT_TOTAL_MICRO, 2 ** 53 - 1);
  t.true(Number.isSafeInteger(9 * MAX_AMOUNT_UNITS * MICRO_PER_UNIT), "nine maximal items still add exactly");
});

test("parseUsageAmount reads a bare JSON number", (t) => {
  t.deepEqual(parseUsageAmount("12.5"), { micro: 12_500_000 });
  t.deepEqual(parseUsageAmount(" 3 "), { micro: 3_000_000 });
  t.deepEqual(parseUsageAmount("0"), { micro: 0 });
  t.deepEqual(parseUsageAmount("1e3"), { micro: 1_000_000_000 });
  t.deepEqual(parseUsageAmount("1000000000"), { micro: 1e15 });
});

test("parseUsageAmount reads an object's numeric amount and ignores its other members", (t) => {
  t.deepEqual(parseUsageAmount('{"amount":12.5}'), { micro: 12_500_000 });
  t.deepEqual(parseUsageAmount('{"amount": 0.000001, "note": "batch 7"}'), { micro: 1 });
});

test("parseUsageAmount rounds past 6 decimal places to the nearest micro-unit", (t) => {
  t.deepEqual(parseUsageAmount("0.30000000000000004"), { micro: 300_000 });
  t.deepEqual(parseUsageAmount('{"amount":1.0000005}'), { micro: 1_000_001 });
  t.deepEqual(parseUsageAmount("0.0000004"), { micro: 0 });
});

function problemOf(eventData: string): string {
  const parsed = parseUsageAmount(eventData);
  return "problem" in parsed ? parsed.problem : `no problem: ${parsed.micro}`;
}

test("parseUsageAmount refuses what holds no amount, saying what is wrong", (t) => {
  t.regex(problemOf(""), /^is empty/);
  t.regex(problemOf("   "), /^is empty/);
  t.regex(problemOf("twelve"), /^is not valid JSON/);
  t.regex(problemOf("{amount:1}"), /^is not valid JSON/);
  t.regex(problemOf("NaN"), /^is not valid JSON/);
  t.regex(problemOf("Infinity"), /^is not valid JSON/);
  t.regex(problemOf('"12.5"'), /^is a string, not an amount/);
  t.regex(problemOf("true"), /^is a boolean, not an amount/);
  t.regex(problemOf("null"), /^is null, not an amount/);
  t.regex(problemOf("[1]"), /^is an array, not an amount/);
  t.regex(problemOf("{}"), /^is an object without "amount"/);
  t.regex(problemOf('{"amount":"12.5"}'), /^holds an "amount" that is a string, not a number/);
  t.regex(problemOf('{"amount":null}'), /^holds an "amount" that is null/);
  t.regex(problemOf('{"amount":{"value":1}}'), /^holds an "amount" that is an object/);
  for (const problem of [problemOf(""), problemOf("[1]")]) t.true(problem.includes('{"amount":12.5}'), problem);
});

test("parseUsageAmount refuses negative, too large and non-finite amounts", (t) => {
  t.regex(problemOf("-1"), /negative/);
  t.regex(problemOf('{"amount":-0.5}'), /negative/);
  t.regex(problemOf("1000000000.000001"), /above the largest allowed, 1000000000/);
  t.regex(problemOf('{"amount":1e10}'), /above the largest allowed/);
  t.regex(problemOf("1e400"), /above the largest allowed/, "JSON.parse makes it Infinity");
  t.regex(problemOf("-1e400"), /negative/);
});

test("parseUsageAmount reads plain decimals as toMicro reads the number JSON makes of them", (t) => {
  let state = 20261127;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  const digits = (count: number) => Array.from({ length: count }, () => Math.floor(random() * 10)).join("");
  const texts = [
    "0",
    "1",
    "0.5",
    "0.0000005",
    "0.0000004999",
    "0.00000049999999999999999",
    "999999999.9999995",
    "1000000000",
    "1000000000.000001",
  ];
  for (let round = 0; round < 20_000; round++) {
    const whole = String(BigInt(digits(1 + Math.floor(random() * 10))));
    const fraction = random() < 0.7 ? `.${digits(1 + Math.floor(random() * 12))}` : "";
    texts.push(`${whole}${fraction}`);
  }
  for (const text of texts) {
    const number = JSON.parse(text) as number;
    const micro = toMicro(number);
    const expected = micro === undefined ? undefined : { micro };
    const parsed = parseUsageAmount(text);
    if ("micro" in parsed ? parsed.micro !== expected?.micro : expected !== undefined) {
      t.fail(`${text}: ${JSON.stringify(parsed)} against ${JSON.stringify(expected)}`);
      return;
    }
  }
  t.pass();
});
