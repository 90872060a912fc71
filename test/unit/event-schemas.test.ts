import {
  create,
  type DescField,
  type DescMessage,
  fromJson,
  getOption,
  hasOption,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { DurationSchema, isWrapperDesc, TimestampSchema } from "@bufbuild/protobuf/wkt";
import test from "ava";
import {
  EntitlementActivatedDataSchema,
  event,
  file_provision_v1_webhook_events,
} from "../../gen/provision/v1/webhook_events_pb.js";
import { encodeResponseText } from "../../src/server/rest/json-encoder.js";
import { dataSchemaText, eventSchemas } from "../../src/webhooks/event-schemas.js";
import { KitchenSinkSchema, Proto2Schema } from "../support/kitchen-sink.js";

type Schema = { [keyword: string]: any };

/** The event types issue 7 emits, with their envelope `entitykind` (the plan's table). */
const EMITTED: Record<string, string> = {
  "Entitlement.Activated": "entitlement",
  "Entitlement.Cancelled": "entitlement",
  "Entitlement.Expiring": "entitlement",
  "Entitlement.PlanApplied": "entitlement",
  "Entitlement.Renewed": "entitlement",
  "Entitlement.TrialExpiring": "entitlement",
  "Webhooks.Registration.Challenge": "webhook-subscription",
};

const declaredMessages = file_provision_v1_webhook_events.messages.filter((message) => hasOption(message, event));

// A structural validator for exactly the keywords the generator emits; any other keyword is an error, so a
// schema cannot pass by using something this validator would ignore.

const ANNOTATIONS = new Set(["$schema", "title", "description", "$defs", "contentEncoding"]);
const ASSERTIONS = new Set([
  "$ref",
  "type",
  "const",
  "enum",
  "anyOf",
  "oneOf",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "required",
  "properties",
  "additionalProperties",
  "propertyNames",
  "items",
]);
const RFC_3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function validate(schema: Schema, value: unknown, root: Schema, path = "data"): string[] {
  const errors: string[] = [];
  const fail = (message: string) => errors.push(`${path}: ${message}`);
  for (const keyword of Object.keys(schema)) {
    if (!ANNOTATIONS.has(keyword) && !ASSERTIONS.has(keyword)) fail(`unknown keyword ${keyword}`);
  }
  if (schema.$ref !== undefined) errors.push(...validate(resolve(root, schema.$ref), value, root, path));
  if (schema.type !== undefined && ![schema.type].flat().some((type) => isOfType(type, value))) {
    fail(`${JSON.stringify(value)} is not ${[schema.type].flat().join(" or ")}`);
  }
  if ("const" in schema && value !== schema.const) fail(`${JSON.stringify(value)} is not ${schema.const}`);
  if (schema.enum && !schema.enum.includes(value)) fail(`${JSON.stringify(value)} is not one of ${schema.enum}`);
  const matching = (branches: Schema[]) => branches.filter((branch) => validate(branch, value, root).length === 0);
  if (schema.anyOf && matching(schema.anyOf).length === 0) fail(`${JSON.stringify(value)} matches no anyOf branch`);
  if (schema.oneOf && matching(schema.oneOf).length !== 1) fail(`${JSON.stringify(value)} matches not one oneOf`);
  if (typeof value === "string") errors.push(...stringErrors(schema, value, path));
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) fail(`${value} is below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) fail(`${value} is above ${schema.maximum}`);
  }
  if (Array.isArray(value) && schema.items) {
    for (const [index, item] of value.entries())
      errors.push(...validate(schema.items, item, root, `${path}[${index}]`));
  }
  if (isOfType("object", value)) errors.push(...objectErrors(schema, value as Record<string, unknown>, root, path));
  return errors;
}

function stringErrors(schema: Schema, value: string, path: string): string[] {
  const errors: string[] = [];
  if (schema.pattern && !new RegExp(schema.pattern, "u").test(value))
    errors.push(`${path}: ${value} !~ ${schema.pattern}`);
  if (schema.format === "date-time" && (!RFC_3339.test(value) || Number.isNaN(Date.parse(value)))) {
    errors.push(`${path}: ${value} is not an RFC 3339 date-time`);
  }
  if (schema.contentEncoding === "base64" && Buffer.from(value, "base64").toString("base64") !== value) {
    errors.push(`${path}: ${value} is not base64`);
  }
  return errors;
}

function objectErrors(schema: Schema, value: Record<string, unknown>, root: Schema, path: string): string[] {
  const errors: string[] = [];
  for (const name of schema.required ?? []) if (!Object.hasOwn(value, name)) errors.push(`${path}: ${name} missing`);
  for (const [name, member] of Object.entries(value)) {
    const memberPath = `${path}.${name}`;
    if (schema.propertyNames) errors.push(...validate(schema.propertyNames, name, root, `${memberPath} (name)`));
    const declared = schema.properties && Object.hasOwn(schema.properties, name);
    const memberSchema = declared ? schema.properties[name] : schema.additionalProperties;
    if (memberSchema === false) errors.push(`${memberPath}: not allowed`);
    else if (memberSchema !== undefined && memberSchema !== true) {
      errors.push(...validate(memberSchema, member, root, memberPath));
    }
  }
  return errors;
}

function isOfType(type: string, value: unknown): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "integer":
      return Number.isInteger(value);
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    default:
      return typeof value === type;
  }
}

function resolve(root: Schema, ref: string): Schema {
  const prefix = "#/$defs/";
  if (!ref.startsWith(prefix) || !root.$defs?.[ref.slice(prefix.length)]) throw new Error(`unresolved ${ref}`);
  return root.$defs[ref.slice(prefix.length)];
}

// Messages with every field set (each variant picks other values and oneof members), for the samples.

const TIMESTAMPS = [
  { seconds: 1_780_000_000n, nanos: 123_456_789 },
  { seconds: -62_135_596_800n, nanos: 0 },
  { seconds: 951_782_400n, nanos: 1_000_000 },
];
const DURATIONS = [
  { seconds: 93_784n, nanos: 500_000_000 },
  { seconds: -1n, nanos: -500_000_000 },
  { seconds: 0n, nanos: 0 },
];

function filled(schema: DescMessage, variant: number, depth = 0): Message {
  const init: Record<string, unknown> = {};
  for (const oneof of schema.oneofs) {
    const field = oneof.fields[variant % oneof.fields.length];
    const value = singularValue(field, variant, depth);
    if (value !== undefined) init[oneof.localName] = { case: field.localName, value };
  }
  for (const field of schema.fields) {
    if (field.oneof) continue;
    const value = fieldValue(field, variant, depth);
    if (value !== undefined) init[field.localName] = value;
  }
  return create(schema, init as never);
}

function fieldValue(field: DescField, variant: number, depth: number): unknown {
  if (field.fieldKind === "list") {
    if (field.listKind === "message" && depth >= 2) return [];
    return [0, 1].map((offset) => elementValue(field, variant + offset, depth));
  }
  if (field.fieldKind === "map") {
    if (field.mapKind === "message" && depth >= 2) return {};
    const keys = mapKeys(field.mapKey);
    return Object.fromEntries(keys.map((key, offset) => [key, elementValue(field, variant + offset, depth)]));
  }
  if (field.fieldKind === "message" && isWrapperDesc(field.message)) {
    return scalarValue(field.message.fields[0].scalar as ScalarType, variant, false);
  }
  return singularValue(field, variant, depth);
}

function singularValue(field: DescField, variant: number, depth: number): unknown {
  switch (field.fieldKind) {
    case "message":
      return messageValue(field.message, variant, depth);
    case "enum":
      return field.enum.values[variant % field.enum.values.length].number;
    case "scalar":
      return scalarValue(field.scalar, variant, field.longAsString);
    default:
      return undefined;
  }
}

function elementValue(field: DescField & { fieldKind: "list" | "map" }, variant: number, depth: number): unknown {
  if (field.message) return messageValue(field.message, variant, depth);
  if (field.enum) return field.enum.values[variant % field.enum.values.length].number;
  return scalarValue(field.scalar as ScalarType, variant, (field as { longAsString?: boolean }).longAsString);
}

function messageValue(schema: DescMessage, variant: number, depth: number): unknown {
  switch (schema.typeName) {
    case "google.protobuf.Timestamp":
      return create(TimestampSchema, TIMESTAMPS[variant % TIMESTAMPS.length]);
    case "google.protobuf.Duration":
      return create(DurationSchema, DURATIONS[variant % DURATIONS.length]);
    case "google.protobuf.Struct":
      return { list: [1, "two", null], nested: { flag: variant % 2 === 0 } };
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return fromJson(schema, [variant, { text: "x" }]);
    case "google.protobuf.FieldMask":
      return create(schema, { paths: ["display_name", "b_c.d_e"] } as never);
  }
  if (isWrapperDesc(schema)) return create(schema, { value: scalarValue(schema.fields[0].scalar, variant) } as never);
  if (schema.typeName.startsWith("google.protobuf.")) return create(schema);
  return depth >= 2 ? undefined : filled(schema, variant + 1, depth + 1);
}

function scalarValue(type: ScalarType, variant: number, longAsString = false): unknown {
  const pick = <T>(values: T[]) => values[variant % values.length];
  switch (type) {
    case ScalarType.STRING:
      return pick(['quote " and ✓', "", "plain"]);
    case ScalarType.BOOL:
      return variant % 2 === 0;
    case ScalarType.BYTES:
      return pick([Uint8Array.of(0, 255, 7), new Uint8Array(0)]);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return pick([1.5, Number.NaN, Number.NEGATIVE_INFINITY, -0.25]);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64: {
      const value = pick([-9_223_372_036_854_775_808n, 7n, 9_007_199_254_740_993n]);
      return longAsString ? String(value) : value;
    }
    case ScalarType.UINT64:
    case ScalarType.FIXED64: {
      const value = pick([18_446_744_073_709_551_615n, 0n]);
      return longAsString ? String(value) : value;
    }
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return pick([4_294_967_295, 0]);
    default:
      return pick([-2_147_483_648, 42, 2_147_483_647]);
  }
}

function mapKeys(type: ScalarType): string[] {
  switch (type) {
    case ScalarType.STRING:
      return ["k", "ключ 🔑"];
    case ScalarType.BOOL:
      return ["true", "false"];
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return ["0", "12"];
    default:
      return ["-1", "7"];
  }
}

/** Samples of a message's REST JSON: unset (every message field null), then filled in three ways. */
function samples(schema: DescMessage): Record<string, unknown>[] {
  const messages = [create(schema), filled(schema, 0), filled(schema, 1), filled(schema, 2)];
  return messages.map((message) => JSON.parse(encodeResponseText(schema, message)));
}

function schemaOf(message: DescMessage): Schema {
  return JSON.parse(dataSchemaText(message, { title: "Test.Type", description: "test" }));
}

function schemaOfType(type: string): Schema {
  const found = eventSchemas().find((candidate) => candidate.type === type);
  if (!found) throw new Error(`${type} is not listed`);
  return JSON.parse(found.dataSchema);
}

test("every declared event type is listed once, ordered by type, with its entitykind and eventversion", (t) => {
  const listed = eventSchemas();
  const types = listed.map((schema) => schema.type);
  t.deepEqual(types, [...types].sort());
  t.is(new Set(types).size, types.length);
  t.deepEqual(types, declaredMessages.map((message) => getOption(message, event).type).sort());
  for (const message of declaredMessages) {
    const declaration = getOption(message, event);
    const schema = listed.find((candidate) => candidate.type === declaration.type);
    t.like(schema, {
      entitykind: declaration.entitykind,
      eventversion: declaration.eventversion,
      description: declaration.description,
    });
    t.true((schema?.description.length ?? 0) > 0, declaration.type);
  }
  for (const [type, entitykind] of Object.entries(EMITTED)) {
    t.like(
      listed.find((schema) => schema.type === type),
      { entitykind, eventversion: 1 },
      type,
    );
  }
});

test("types without a data message are not listed", (t) => {
  const types = eventSchemas().map((schema) => schema.type);
  for (const type of ["DataSubjectRequest.Filed", "User.Erased"]) {
    t.false(types.includes(type), type);
  }
});

test("the list is computed once", (t) => {
  t.is(eventSchemas(), eventSchemas());
});

test("each data schema is a draft 2020-12 object schema naming every field, open to new members, with _test", (t) => {
  for (const message of declaredMessages) {
    const type = getOption(message, event).type;
    const schema = schemaOfType(type);
    t.is(schema.$schema, "https://json-schema.org/draft/2020-12/schema", type);
    t.is(schema.title, type);
    t.is(schema.type, "object", type);
    t.is(schema.additionalProperties, true, type);
    const names = message.fields.map((field) => field.jsonName);
    t.deepEqual(Object.keys(schema.properties), [...names, "_test"], type);
    t.deepEqual(schema.required, names, type);
    t.deepEqual(schema.properties._test.type, "boolean");
    t.regex(schema.properties._test.description, /test/);
  }
});

test("the sample data of every declared type validates against its schema, with and without _test", (t) => {
  for (const message of declaredMessages) {
    const type = getOption(message, event).type;
    const schema = schemaOfType(type);
    for (const data of samples(message)) {
      t.deepEqual(validate(schema, data, schema), [], type);
      t.deepEqual(validate(schema, { _test: true, ...data }, schema), [], type);
    }
  }
});

test("field types are written as the REST JSON writes them", (t) => {
  const activated = schemaOfType("Entitlement.Activated").properties;
  t.deepEqual(activated.entitlementId, { type: "string" });
  t.deepEqual(activated.isTrial, { type: "boolean" });
  t.deepEqual(activated.activatedAt, { type: ["string", "null"], format: "date-time" });
  t.deepEqual(activated.replacedSessionIds, { type: "array", items: { type: "string" } });
  const renewed = schemaOfType("Entitlement.Renewed").properties;
  t.like(renewed.subscriptionPeriodsLeft, { type: "integer", minimum: -2_147_483_648, maximum: 2_147_483_647 });
});

test("data that does not follow the schema fails validation", (t) => {
  const schema = schemaOfType("Entitlement.Activated");
  const data = samples(EntitlementActivatedDataSchema)[1];
  t.deepEqual(validate(schema, { ...data, future: { anything: 1 } }, schema), []);
  const { sessionId: _dropped, ...missing } = data;
  const broken: Record<string, unknown>[] = [
    missing,
    { ...data, isTrial: "yes" },
    { ...data, activatedAt: "tomorrow" },
    { ...data, replacedSessionIds: [1] },
    { ...data, _test: "true" },
  ];
  for (const candidate of broken) t.not(validate(schema, candidate, schema).length, 0, JSON.stringify(candidate));
});

test("a message with every kind of field: lists, maps, enums, oneofs, optionals, 64-bit, wrappers, WKTs", (t) => {
  const schema = schemaOf(KitchenSinkSchema);
  for (const data of samples(KitchenSinkSchema)) t.deepEqual(validate(schema, data, schema), []);
  const properties = schema.properties;
  t.deepEqual(properties.int64Value, { type: "string", pattern: "^-?[0-9]+$" });
  t.deepEqual(properties.uint64Value, { type: "string", pattern: "^[0-9]+$" });
  t.deepEqual(properties.optionalString, { type: ["string", "null"] });
  t.deepEqual(properties.wrappedInt64, { type: ["string", "null"], pattern: "^-?[0-9]+$" });
  t.deepEqual(properties.color, { $ref: "#/$defs/test.v1.Color" });
  t.deepEqual(schema.$defs["test.v1.Color"], {
    type: "integer",
    oneOf: [
      { const: 0, title: "COLOR_UNSPECIFIED" },
      { const: 1, title: "COLOR_RED" },
    ],
  });
  t.deepEqual(properties.child, { anyOf: [{ $ref: "#/$defs/test.v1.KitchenSink" }, { type: "null" }] });
  t.deepEqual(properties.children, { type: "array", items: { $ref: "#/$defs/test.v1.KitchenSink" } });
  t.like(properties.byInt32, { type: "object", propertyNames: { pattern: "^-?[0-9]+$" } });
  t.like(properties.byBool, { propertyNames: { enum: ["true", "false"] } });
  t.deepEqual(properties.nullValue, { type: "null" });
  t.like(properties.duration, { type: ["string", "null"] });
  t.is(schema.$defs["test.v1.KitchenSink"].additionalProperties, true);
  t.deepEqual(
    schema.$defs["test.v1.KitchenSink"].required,
    KitchenSinkSchema.fields.map((field) => field.jsonName),
  );
});

test("kitchen-sink data with a wrong value in any kind of field fails validation", (t) => {
  const schema = schemaOf(KitchenSinkSchema);
  const data = samples(KitchenSinkSchema)[1] as Record<string, any>;
  const broken: Record<string, unknown>[] = [
    { ...data, int64Value: 5 },
    { ...data, int64Value: "5x" },
    { ...data, uint64Value: "-1" },
    { ...data, int32Value: 2_147_483_648 },
    { ...data, int32Value: 1.5 },
    { ...data, color: 99 },
    { ...data, colors: [1, 7] },
    { ...data, duration: "90 minutes" },
    { ...data, byInt32: { x: "text" } },
    { ...data, byBool: { maybe: 0 } },
    { ...data, doubleValue: "1.5" },
    { ...data, bytesValue: "not base64!" },
    { ...data, child: { ...data, stringValue: 3 } },
    { ...data, nullValue: 0 },
  ];
  for (const candidate of broken) t.not(validate(schema, candidate, schema).length, 0);
});

test("proto2 optionals are nullable: they are written as null when unset", (t) => {
  const schema = schemaOf(Proto2Schema);
  for (const data of samples(Proto2Schema)) t.deepEqual(validate(schema, data, schema), []);
  t.deepEqual(schema.properties.name, { type: ["string", "null"] });
});
