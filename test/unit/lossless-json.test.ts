import type { JsonObject } from "@bufbuild/protobuf";
import test from "ava";
import { ProductSchema } from "../../gen/provision/v1/catalog_pb.js";
import { type SessionEvent, SessionEventSchema } from "../../gen/provision/v1/session_event_pb.js";
import { decodeRequest, encodeResponse } from "../../src/server/rest/json-codec.js";
import { parseJsonExactIntegers } from "../../src/server/rest/lossless-json.js";

// parseJsonExactIntegers

test("integers past 2^53 come back as strings of their exact digits", (t) => {
  t.deepEqual(parseJsonExactIntegers('{"id":9007199254740993}'), { id: "9007199254740993" });
  t.deepEqual(parseJsonExactIntegers("[-9223372036854775807, 9223372036854775807]"), [
    "-9223372036854775807",
    "9223372036854775807",
  ]);
  t.deepEqual(parseJsonExactIntegers('{"a":{"b":[18446744073709551615]}}'), { a: { b: ["18446744073709551615"] } });
  t.is(parseJsonExactIntegers("12345678901234567890123"), "12345678901234567890123", "a bare number");
});

test("safe integers, decimals and exponents stay numbers", (t) => {
  const text =
    '{"small":42,"negative":-7,"zero":0,"fifteen":999999999999999,"decimal":12345678901234567.5,' +
    '"exponent":12345678901234567e2,"negativeExponent":-1e-7,"big":1e400}';
  t.deepEqual(parseJsonExactIntegers(text), {
    small: 42,
    negative: -7,
    zero: 0,
    fifteen: 999999999999999,
    decimal: Number("12345678901234567.5"),
    exponent: Number("12345678901234567e2"),
    negativeExponent: -1e-7,
    big: Number.POSITIVE_INFINITY,
  });
});

test("numbers past the double range are Infinity, for the codec to refuse, with or without long integers", (t) => {
  t.deepEqual(parseJsonExactIntegers('{"big":1e400,"small":-1e400}'), {
    big: Number.POSITIVE_INFINITY,
    small: Number.NEGATIVE_INFINITY,
  });
  t.deepEqual(parseJsonExactIntegers('{"big":1e400,"id":12345678901234567890}'), {
    big: Number.POSITIVE_INFINITY,
    id: "12345678901234567890",
  });
  const result = decodeRequest(
    SessionEventSchema,
    parseJsonExactIntegers('{"apiVersion":1e400,"transactionId":9007199254740993}') as JsonObject,
  );
  t.deepEqual("violations" in result ? result.violations.map((violation) => violation.field) : [], ["apiVersion"]);
});

for (const [label, suffix] of [
  ["", ""],
  [" beside a long integer", ',"n":12345678901234567890'],
]) {
  test(`__proto__ is an ordinary key and pollutes no prototype${label}`, (t) => {
    const parsed = parseJsonExactIntegers(`{"__proto__":{"polluted":true},"a":{"__proto__":[1]}${suffix}}`) as any;
    t.deepEqual(Object.keys(parsed).slice(0, 2), ["__proto__", "a"]);
    t.deepEqual(Object.getOwnPropertyDescriptor(parsed, "__proto__")?.value, { polluted: true });
    t.is(Object.getPrototypeOf(parsed), Object.prototype);
    t.is(Object.getPrototypeOf(parsed.a), Object.prototype);
    t.is(({} as any).polluted, undefined);
    t.is(parsed.polluted, undefined);
  });

  test(`a repeated key keeps its last value, as JSON.parse does${label}`, (t) => {
    t.like(parseJsonExactIntegers(`{"a":1,"a":{"b":2}${suffix}}`), { a: { b: 2 } });
  });
}

test("digits inside strings are left alone, escaped quotes included", (t) => {
  t.deepEqual(parseJsonExactIntegers('{"code":"12345678901234567890","n":12345678901234567890}'), {
    code: "12345678901234567890",
    n: "12345678901234567890",
  });
  t.deepEqual(parseJsonExactIntegers('{"12345678901234567890":1}'), { "12345678901234567890": 1 }, "a key");
  t.deepEqual(parseJsonExactIntegers('{"s":"say \\"12345678901234567890\\" twice","n":1}'), {
    s: 'say "12345678901234567890" twice',
    n: 1,
  });
  t.deepEqual(
    parseJsonExactIntegers('{"s":"ends in a backslash \\\\","n":12345678901234567890}'),
    { s: "ends in a backslash \\", n: "12345678901234567890" },
    "an escaped backslash does not escape the closing quote",
  );
  t.deepEqual(parseJsonExactIntegers('["\\u0022", 12345678901234567890, "-12345678901234567890"]'), [
    '"',
    "12345678901234567890",
    "-12345678901234567890",
  ]);
});

test("whitespace and nesting around a long integer are kept valid", (t) => {
  t.deepEqual(parseJsonExactIntegers('{ "a" : [ 12345678901234567890 , { "b" :\n-12345678901234567890 } ] }'), {
    a: ["12345678901234567890", { b: "-12345678901234567890" }],
  });
});

test("malformed JSON throws SyntaxError, with or without long integers", (t) => {
  for (const text of [
    "{nope",
    '{"a":12345678901234567890',
    '{"a":12345678901234567890,}',
    "[012345678901234567890]",
    '{"a":"12345678901234567890}',
    "",
    "NaN",
  ]) {
    t.throws(() => parseJsonExactIntegers(text), { instanceOf: SyntaxError }, JSON.stringify(text));
  }
});

// Through decodeRequest, with the int64 transactionId of a session event.

test("an int64 past 2^53 decodes exactly and encodes back to the same digits", (t) => {
  for (const digits of ["9007199254740993", "9223372036854775807", "-9223372036854775808", "-9007199254740993"]) {
    const result = decodeRequest(
      SessionEventSchema,
      parseJsonExactIntegers(`{"transactionId":${digits}}`) as JsonObject,
    );
    if ("violations" in result) return t.fail(JSON.stringify(result.violations));
    t.is((result.message as SessionEvent).transactionId, BigInt(digits));
    t.is((encodeResponse(SessionEventSchema, result.message) as JsonObject).transactionId, digits);
  }
});

test("without the exact parse the same int64 would be rounded", (t) => {
  const result = decodeRequest(SessionEventSchema, JSON.parse('{"transactionId":9007199254740993}') as JsonObject);
  if ("violations" in result) return t.fail(JSON.stringify(result.violations));
  t.is((result.message as SessionEvent).transactionId, 9007199254740992n);
});

test("an int64 outside its range still answers a violation at the field", (t) => {
  const result = decodeRequest(
    SessionEventSchema,
    parseJsonExactIntegers('{"transactionId":9223372036854775808}') as JsonObject,
  );
  t.deepEqual("violations" in result ? result.violations : [], [
    { field: "transactionId", message: "is out of the int64 range" },
  ]);
});

test("a long integer for an int32 field is still out of range, not a string", (t) => {
  const result = decodeRequest(
    SessionEventSchema,
    parseJsonExactIntegers('{"apiVersion":12345678901234567890}') as JsonObject,
  );
  t.deepEqual("violations" in result ? result.violations.map((violation) => violation.field) : [], ["apiVersion"]);
});

test("a 16-digit safe integer stays a number", (t) => {
  t.deepEqual(parseJsonExactIntegers("[9007199254740991, 1000000000000000]"), [9007199254740991, 1000000000000000]);
});

test("a short integer for a string field is refused", (t) => {
  const short = decodeRequest(ProductSchema, parseJsonExactIntegers('{"productCode":42}') as JsonObject);
  t.deepEqual("violations" in short ? short.violations : [], [{ field: "productCode", message: "must be a string" }]);
});
