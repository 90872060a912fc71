import test from "ava";
import { formatDuration, parseDuration, parseDurationList } from "../../src/platform/durations.js";

test("parseDuration: every unit", (t) => {
  const cases: [string, number][] = [
    ["200ms", 200],
    ["5s", 5_000],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["3d", 259_200_000],
    ["0s", 0],
    ["0ms", 0],
    ["007s", 7_000],
    ["1500ms", 1_500],
    ["90m", 5_400_000],
  ];
  for (const [text, ms] of cases) t.is(parseDuration(text), ms, text);
});

test("parseDuration: refuses anything but a whole number and a lowercase unit", (t) => {
  const invalid = [
    "",
    " ",
    "5",
    "s",
    "ms",
    "-5s",
    "+5s",
    "1.5s",
    "1e3ms",
    "5 s",
    " 5s",
    "5s ",
    "5S",
    "5M",
    "5sec",
    "5us",
    "5w",
    "1h30m",
    "5s,6s",
    "٣s",
    "0x10s",
    "Infinityms",
  ];
  for (const text of invalid) {
    const error = t.throws(() => parseDuration(text), undefined, JSON.stringify(text));
    t.is(
      error?.message,
      `must be a duration (a whole number and ms, s, m, h or d: 200ms, 5s, 5m, 2h, 3d), got ${JSON.stringify(text)}`,
    );
  }
});

test("parseDuration: refuses amounts beyond a safe number of milliseconds", (t) => {
  t.is(parseDuration("104249991d"), 104_249_991 * 86_400_000);
  t.throws(() => parseDuration("104249992d"), { message: /fits in a number of milliseconds, got 104249992d/ });
  t.throws(() => parseDuration(`${"9".repeat(400)}ms`), { message: /fits in a number of milliseconds/ });
});

test("parseDurationList: entries in order, blanks around them allowed", (t) => {
  t.deepEqual(parseDurationList("0s,200ms,1s"), [0, 200, 1_000]);
  t.deepEqual(parseDurationList(" 0s , 5s,\t5m ,30m "), [0, 5_000, 300_000, 1_800_000]);
  t.deepEqual(parseDurationList("3d"), [259_200_000]);
});

test("parseDurationList: refuses empty lists and entries, naming the entry", (t) => {
  t.throws(() => parseDurationList(""), { message: /got nothing/ });
  t.throws(() => parseDurationList("  "), { message: /got nothing/ });
  t.throws(() => parseDurationList("0s,,1s"), { message: 'has an empty entry (number 2) in "0s,,1s"' });
  t.throws(() => parseDurationList("0s,1s,"), { message: /empty entry \(number 3\)/ });
  t.throws(() => parseDurationList(",0s"), { message: /empty entry \(number 1\)/ });
  t.throws(() => parseDurationList("0s, ,1s"), { message: /empty entry \(number 2\)/ });
  t.throws(() => parseDurationList("0s,5x"), { message: /^entry 2 must be a duration .*, got "5x"$/ });
  t.throws(() => parseDurationList("0s;5s"), { message: /^entry 1 must be a duration/ });
  t.throws(() => parseDurationList("1 s,2s"), { message: /^entry 1 .*got "1 s"$/ });
});

test("formatDuration: the largest unit that divides, and parseDuration reads it back", (t) => {
  const cases: [number, string][] = [
    [0, "0ms"],
    [200, "200ms"],
    [1_500, "1500ms"],
    [5_000, "5s"],
    [90_000, "90s"],
    [300_000, "5m"],
    [7_200_000, "2h"],
    [604_800_000, "7d"],
  ];
  for (const [ms, text] of cases) {
    t.is(formatDuration(ms), text);
    t.is(parseDuration(text), ms);
  }
});
