import { create, type DescMessage, type JsonObject, type Message } from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import test from "ava";
import {
  ListProductsResponseSchema,
  MonitoredAssetSchema,
  ProductSchema,
  PropertyValueSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { encodeResponseInChunks } from "../../src/server/rest/chunked-codec.js";
import { encodeResponse } from "../../src/server/rest/json-codec.js";
import { encodeResponseText } from "../../src/server/rest/json-encoder.js";
import { routesFromAnnotations } from "../../src/server/rest/route-table.js";
import { ALL_SERVICES } from "../../src/services.js";
import { KitchenSinkSchema, Proto2Schema } from "../support/kitchen-sink.js";
import { MessageFiller } from "../support/message-filler.js";

const SEEDS = 40;

/** The reference: what the REST path wrote before the encoder, toJson completed, then JSON.stringify. */
function reference(schema: DescMessage, message: Message): string {
  return JSON.stringify(encodeResponse(schema, message));
}

/** Every message type a response of the contract can hold, the responses themselves included. */
function responseMessages(): DescMessage[] {
  const found = new Map<string, DescMessage>();
  const visit = (message: DescMessage) => {
    if (found.has(message.typeName)) return;
    found.set(message.typeName, message);
    for (const field of message.fields) if (field.message) visit(field.message);
  };
  for (const service of ALL_SERVICES) for (const method of service.methods) visit(method.output);
  return [...found.values()];
}

/** The first few messages (default, then filled from seeds) whose text differs from the reference's. */
function mismatches(schema: DescMessage): { seed: number | "default"; expected: string; actual: string }[] {
  const found = [];
  const cases: [number | "default", Message][] = [["default", create(schema)]];
  for (let seed = 0; seed < SEEDS; seed++) cases.push([seed, new MessageFiller(seed).message(schema)]);
  for (const [seed, message] of cases) {
    const expected = reference(schema, message);
    const actual = encodeResponseText(schema, message);
    if (actual !== expected && found.length < 3) found.push({ seed, expected, actual });
  }
  return found;
}

test("every message type of every response is written exactly as toJson, completed and stringified, wrote it", (t) => {
  const schemas = responseMessages();
  t.true(schemas.length > 50, `only ${schemas.length} message types found`);
  t.true(schemas.some((schema) => schema.typeName === "google.protobuf.Duration"));
  for (const schema of schemas) t.deepEqual(mismatches(schema), [], schema.typeName);
});

test("every scalar, oneof, map key, well-known type and proto2 default is written as before (messages made for the test)", (t) => {
  t.deepEqual(mismatches(KitchenSinkSchema), []);
  t.deepEqual(mismatches(Proto2Schema), []);
  const filled = new MessageFiller(7).message(KitchenSinkSchema);
  const text = encodeResponseText(KitchenSinkSchema, filled);
  t.is(Object.keys(JSON.parse(text)).length, KitchenSinkSchema.fields.length);
});

test("the same text: escapes, 64-bit extremes, NaN, negative durations and fractions of a timestamp", (t) => {
  const product = create(ProductSchema, {
    name: 'a "quoted" \\ name\n\u0000\u001f ✓ \ud800',
    createdAt: { seconds: 1_780_000_000n, nanos: 1_000 },
    expirationDate: { seconds: 253_402_300_799n, nanos: 999_999_999 },
    monitoredAssets: [
      {
        allowedBackDatingTolerance: { seconds: 0n, nanos: -500_000_000 },
        meteredUsage: { usageTiers: [{ startUsage: Number.NaN, endUsage: Number.NEGATIVE_INFINITY, baseCredits: -0 }] },
      },
    ],
    propertyValues: { "": { key: "" }, "10": { key: "ten" }, "2": { key: "two" } },
  });
  const text = encodeResponseText(ProductSchema, product);
  t.is(text, reference(ProductSchema, product));
  const json = JSON.parse(text);
  t.is(json.name, 'a "quoted" \\ name\n\u0000\u001f ✓ \ud800');
  t.is(json.createdAt, "2026-05-28T20:26:40.000001Z");
  t.is(json.monitoredAssets[0].allowedBackDatingTolerance, "-00:00:00.5000000");
  t.deepEqual(Object.keys(json.propertyValues), ["2", "10", ""]);
  t.like(json.monitoredAssets[0].meteredUsage.usageTiers[0], {
    startUsage: "NaN",
    endUsage: "-Infinity",
    baseCredits: 0,
  });
});

test("a timestamp anywhere from year 1 to 9999 is written as toJson writes it", (t) => {
  const boundaries = ["1600-02-29", "1700-03-01", "1900-02-28", "1970-01-01", "2000-02-29", "2100-03-01", "9999-12-31"];
  const seconds = boundaries.flatMap((day) => {
    const midnight = Date.parse(`${day}T00:00:00Z`) / 1000;
    return [midnight - 1, midnight, midnight + 1, midnight + 86_399];
  });
  const first = Date.parse("0001-01-01T00:00:00Z") / 1000;
  const span = Date.parse("9999-12-31T23:59:59Z") / 1000 - first;
  for (let index = 0; index < 20_000; index++)
    seconds.push(first + Math.floor(((index * 7_919) % 20_000) * (span / 20_000)));
  const wrong = seconds.filter((value) => {
    const stamp = create(TimestampSchema, { seconds: BigInt(value), nanos: value % 3 === 0 ? 0 : 120_000_000 });
    return encodeResponseText(TimestampSchema, stamp) !== reference(TimestampSchema, stamp);
  });
  t.deepEqual(wrong, []);
});

test("a map key __proto__ is left out, as it was", (t) => {
  const product = create(ProductSchema, {});
  Object.defineProperty(product.propertyValues, "__proto__", {
    value: create(PropertyValueSchema, { key: "x" }),
    enumerable: true,
  });
  product.propertyValues.kept = create(PropertyValueSchema, { key: "kept" });
  const text = encodeResponseText(ProductSchema, product);
  t.is(text, reference(ProductSchema, product));
  t.deepEqual(Object.keys(JSON.parse(text).propertyValues), ["kept"]);
});

test("a duration or timestamp toJson refuses is refused with the same error", (t) => {
  const refusals: [DescMessage, Message][] = [
    [MonitoredAssetSchema, create(MonitoredAssetSchema, { allowedBackDatingTolerance: { seconds: 315_576_000_001n } })],
    [MonitoredAssetSchema, create(MonitoredAssetSchema, { allowedBackDatingTolerance: { seconds: 1n, nanos: -1 } })],
    [
      MonitoredAssetSchema,
      create(MonitoredAssetSchema, { allowedBackDatingTolerance: { seconds: 0n, nanos: 1_000_000_000 } }),
    ],
    [ProductSchema, create(ProductSchema, { createdAt: { seconds: 253_402_300_800n } })],
    [ProductSchema, create(ProductSchema, { createdAt: { seconds: -62_135_596_801n } })],
    [ProductSchema, create(ProductSchema, { createdAt: { seconds: 0n, nanos: -1 } })],
  ];
  for (const [schema, message] of refusals) {
    const expected = t.throws(() => reference(schema, message));
    t.throws(() => encodeResponseText(schema, message), { message: expected?.message });
  }
});

test("a long top-level list is written a chunk at a time, letting other work run in between, to the same text", async (t) => {
  const page = (count: number) =>
    create(ListProductsResponseSchema, {
      items: Array.from({ length: count }, (_, index) => new MessageFiller(index).message(ProductSchema) as never),
      totalCount: count,
    });
  const long = page(250);
  let turned = false;
  setImmediate(() => {
    turned = true;
  });
  t.is(await encodeResponseInChunks(ListProductsResponseSchema, long), reference(ListProductsResponseSchema, long));
  t.true(turned);

  const short = page(20);
  turned = false;
  setImmediate(() => {
    turned = true;
  });
  t.is(await encodeResponseInChunks(ListProductsResponseSchema, short), reference(ListProductsResponseSchema, short));
  t.false(turned);
});

test("a route's response_body is that field of the response alone, null when unset", async (t) => {
  const routes = routesFromAnnotations(ALL_SERVICES).filter((route) => route.responseBody);
  t.true(routes.length > 0);
  for (const { rpc, responseBody } of routes) {
    const field = rpc.output.fields.find((candidate) => candidate.name === responseBody);
    if (!field) throw new Error(`${rpc.name}: no field ${responseBody}`);
    for (const message of [create(rpc.output), new MessageFiller(3).message(rpc.output)]) {
      const expected = JSON.stringify((encodeResponse(rpc.output, message) as JsonObject)[field.jsonName]);
      t.is(await encodeResponseInChunks(rpc.output, message, responseBody), expected, rpc.name);
    }
    if (field.fieldKind === "message") {
      t.is(await encodeResponseInChunks(rpc.output, create(rpc.output), responseBody), "null");
    }
  }
});

test("a deep-frozen message (a cached product) is written as before, and again the same after an equal unfrozen one changes", (t) => {
  const freeze = (value: unknown): void => {
    if (typeof value !== "object" || value === null || ArrayBuffer.isView(value)) return;
    for (const child of Object.values(value)) freeze(child);
    Object.freeze(value);
  };
  const frozen = new MessageFiller(3).message(ProductSchema);
  const expected = reference(ProductSchema, frozen);
  freeze(frozen);
  t.is(encodeResponseText(ProductSchema, frozen), expected);
  t.is(encodeResponseText(ProductSchema, frozen), expected);
  const unfrozen = new MessageFiller(3).message(ProductSchema);
  t.is(encodeResponseText(ProductSchema, unfrozen), expected);
  (unfrozen as unknown as { name: string }).name = "changed";
  t.not(encodeResponseText(ProductSchema, unfrozen), expected);
  t.is(encodeResponseText(ProductSchema, frozen), expected);
});
