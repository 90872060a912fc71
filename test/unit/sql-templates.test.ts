import test from "ava";
import mysql from "mysql2";
import { type SqlEscaper, SqlTemplates } from "../../src/platform/sql-templates.js";

const escaper = mysql as unknown as SqlEscaper;

/** A text of the shapes the service sends, with placeholders among quotes and comments that hide `?`. */
const TEXTS = [
  "SELECT * FROM t WHERE id = ?",
  "UPDATE t SET a = ?, b = COALESCE(b, ?) WHERE id = ? AND note <> 'what?' AND `odd?col` = ?",
  "INSERT INTO t (a, b, c) VALUES (?, ?, ?), (?, ?, ?)",
  "SELECT 1 -- is it?\nFROM t WHERE a IN (?) /* or this? */ AND b = ?",
  "SELECT \"a?b\", 'it''s?', ? # trailing?\n, ?",
  "START TRANSACTION;\nSELECT a FROM t WHERE id = ? FOR UPDATE;\nUPDATE t SET n = n + ? WHERE id = ?;\nCOMMIT",
  "SELECT ?? FROM t WHERE id = ?",
  "UPDATE t SET ? WHERE id = ?",
  "INSERT INTO t SET ?",
  "SELECT 'a\\'?' , ?",
];

const VALUES: unknown[] = [
  "plain",
  'it\'s "quoted" \\ with\nnewline\u0000 and ✓',
  "",
  0,
  -12.5,
  2n ** 70n,
  true,
  false,
  null,
  undefined,
  new Date(Date.UTC(2026, 10, 27, 19, 53, 31, 524)),
  Buffer.from([0, 1, 254, 255]),
  ["a", 1, null, new Date(Date.UTC(2020, 0, 1))],
  [
    ["x", 1],
    ["y", 2],
  ],
  { a: 1, b: "two" },
  new Map([["a", 1]]),
  mysql.raw("NOW()"),
];

/** A deterministic pseudo-random pick, so a failure names a case that can be run again. */
function picker(seed: number) {
  let state = seed;
  return <T>(items: readonly T[]): T => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return items[state % items.length];
  };
}

test("values are written into every text exactly as mysql2's format writes them", (t) => {
  const templates = new SqlTemplates(escaper);
  const pick = picker(7);
  for (let round = 0; round < 4_000; round++) {
    const sql = pick(TEXTS);
    const count = (sql.match(/\?/g)?.length ?? 0) + pick([-2, -1, 0, 0, 0, 0, 1]);
    const values = Array.from({ length: Math.max(0, count) }, () => pick(VALUES));
    const timezone = pick(["Z", "local", "+02:00"]);
    const expected = escaper.format(sql, values, false, timezone);
    t.is(templates.format(sql, values, timezone), expected, `${sql} with ${values.length} values, ${timezone}`);
  }
});

test("a text without values, or values that are not a list, is written as mysql2 writes it", (t) => {
  const templates = new SqlTemplates(escaper);
  t.is(templates.format("SELECT 'a?' , ?", [], "Z"), "SELECT 'a?' , ?");
  t.is(templates.format("SELECT ?", "one", "Z"), escaper.format("SELECT ?", ["one"], false, "Z"));
  t.is(templates.format("SELECT ?", undefined, "Z"), escaper.format("SELECT ?", undefined as never, false, "Z"));
});

test("a text whose placeholders were found once is written again with other values", (t) => {
  const templates = new SqlTemplates(escaper);
  const sql = "UPDATE t SET a = ? WHERE note = 'why?' AND id = ?";
  t.is(templates.format(sql, ["x", 1], "Z"), "UPDATE t SET a = 'x' WHERE note = 'why?' AND id = 1");
  t.is(templates.format(sql, ["y'z", 2], "Z"), "UPDATE t SET a = 'y\\'z' WHERE note = 'why?' AND id = 2");
});

test("a text longer than the texts kept is written as mysql2 writes it", (t) => {
  const templates = new SqlTemplates(escaper);
  const rows = Array.from({ length: 3_000 }, () => "(?, ?, 'a?')").join(", ");
  const sql = `INSERT INTO t (a, b, c) VALUES ${rows}`;
  t.true(sql.length > 16 * 1024);
  const values = Array.from({ length: 6_000 }, (_, index) => (index % 2 === 0 ? `v'${index}` : index));
  t.is(templates.format(sql, values, "Z"), escaper.format(sql, values, false, "Z"));
});
