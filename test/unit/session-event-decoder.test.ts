import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import test from "ava";
import { SessionEventSchema } from "../../gen/provision/v1/session_event_pb.js";
import { decodeRequest } from "../../src/server/rest/json-codec.js";
import { decodeSessionEvent } from "../../src/server/rest/session-event-decoder.js";

// The SessionEvent decoder must take every input it takes to the message the generic REST decoder makes of it,
// and leave to the generic decoder every input that decoder refuses.

const KEYS = [
  "transactionId",
  "transaction_id",
  "sessionId",
  "session_id",
  "apiVersion",
  "api_version",
  "creationDateTime",
  "creation_date_time",
  "eventName",
  "event_name",
  "eventData",
  "event_data",
  "somethingElse",
];

const VALUES: JsonValue[] = [
  null,
  true,
  "",
  "api-calls",
  "é ✓",
  "1",
  "-5",
  " 7",
  "1.5",
  "1e3",
  "123456789012345678",
  "9223372036854775807",
  "9223372036854775808",
  "-9223372036854775808",
  0,
  -0,
  1,
  -1,
  1.5,
  2147483647,
  2147483648,
  -2147483648,
  -2147483649,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 1,
  1e21,
  "2026-01-31T12:00:00Z",
  "2026-01-31t12:00:00.123456789+02:00",
  "2026-02-30T00:00:00Z",
  "0001-01-01T00:00:00Z",
  "2026-01-31",
  {},
  [],
  ["a"],
];

/** A pseudo-random sequence, the same on every run. */
function sequence(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

function generic(json: JsonObject) {
  return decodeRequest(SessionEventSchema, json);
}

test("the everyday item decodes without the generic decoder, to the same message", (t) => {
  const items: JsonObject[] = [
    { transactionId: 42, eventName: "api-calls", eventData: "1" },
    { transactionId: "123456789012345678", eventName: "render-minutes", eventData: "2.5", apiVersion: 1 },
    {
      transactionId: 7,
      sessionId: "6a1b2c3d-0000-4000-8000-000000000001",
      creationDateTime: "2026-11-27T10:00:00.5Z",
      eventName: "error",
      eventData: '{"message":"disk full"}',
    },
    { event_name: "api-calls", event_data: "3", transaction_id: 1, creationDateTime: null },
    {},
  ];
  for (const item of items) {
    const fast = decodeSessionEvent(item);
    t.truthy(fast, JSON.stringify(item));
    const slow = generic(item);
    t.false("violations" in slow, JSON.stringify(item));
    if ("message" in slow) t.deepEqual(fast, slow.message, JSON.stringify(item));
  }
});

test("random items: whatever the decoder takes, the generic decoder takes to the same message", (t) => {
  const random = sequence(20261127);
  const pick = <T>(values: T[]) => values[Math.floor(random() * values.length)];
  let taken = 0;
  let left = 0;
  for (let round = 0; round < 20_000; round++) {
    const item: JsonObject = {};
    const fields = Math.floor(random() * 5);
    for (let field = 0; field < fields; field++) item[pick(KEYS)] = pick(VALUES);
    const fast = decodeSessionEvent(item);
    const slow = generic(item);
    if (fast === undefined) {
      left++;
      continue;
    }
    taken++;
    if ("violations" in slow) t.fail(`taken, but the generic decoder refuses ${JSON.stringify(item)}`);
    else if (!isDeepStrictEqual(fast, slow.message)) {
      t.fail(`${JSON.stringify(item)}: ${JSON.stringify(fast, bigints)} ≠ ${JSON.stringify(slow.message, bigints)}`);
    }
  }
  t.true(taken > 1000 && left > 1000, `taken ${taken}, left to the generic decoder ${left}`);
});

function bigints(_key: string, value: unknown) {
  return typeof value === "bigint" ? `${value}n` : value;
}
