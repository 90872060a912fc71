import { create, type DescEnum, type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";
import { type EventSchema, EventSchemaSchema } from "../../gen/provision/v1/webhook_pb.js";
import { EVENT_CATALOG } from "./event-catalog.js";

// JSON Schemas of REST JSON as src/server/rest/json-encoder.ts writes it: every field present under its JSON
// name (null when a message, optional or oneof field is unset), enums as integers, 64-bit integers as strings,
// Timestamps as RFC 3339, Durations as .NET TimeSpan text. Descriptors embedded by protoc-gen-es carry no
// source info, so the proto comments are not available here: fields have no descriptions.

type JsonSchema = { [keyword: string]: unknown };
type Definitions = Map<string, JsonSchema>;
/** The kind of a field's value, or of a list element or map value. */
type ValueKind = { scalar: ScalarType } | { enum: DescEnum } | { message: DescMessage };

const DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema";
/** Presence of a proto3 scalar without `optional`: it is always written, never null. */
const IMPLICIT = 2;
const TEST_FLAG: JsonSchema = {
  type: "boolean",
  description: "true on test deliveries (test-fire), absent otherwise; receivers must not apply them to real state",
};
const SIGNED_INTEGER_TEXT = "^-?[0-9]+$";
const UNSIGNED_INTEGER_TEXT = "^[0-9]+$";
const WELL_KNOWN: Record<string, JsonSchema> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time" },
  "google.protobuf.Duration": {
    type: "string",
    pattern: "^-?([0-9]+\\.)?[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{7})?$",
    description: ".NET TimeSpan: [-][d.]hh:mm:ss[.fffffff]",
  },
  "google.protobuf.Value": {},
  "google.protobuf.ListValue": { type: "array" },
  "google.protobuf.FieldMask": { type: "string" },
};

let schemas: readonly EventSchema[] | undefined;

/** ListEventSchemas' list: every catalog type that has a data message, ordered by type. Computed once. */
export function eventSchemas(): readonly EventSchema[] {
  schemas ??= EVENT_CATALOG.flatMap((entry) => {
    if (!entry.dataSchema) return [];
    const dataSchema = dataSchemaText(entry.dataSchema, { title: entry.type, description: entry.description });
    return [
      create(EventSchemaSchema, {
        type: entry.type,
        description: entry.description,
        eventversion: entry.eventVersion,
        entitykind: entry.entityKind,
        dataSchema,
      }),
    ];
  });
  return schemas;
}

/**
 * The JSON Schema (draft 2020-12) text of an event's `data` written from this message: its REST JSON, plus
 * `_test`; other members are allowed (data is non-strict). Nested messages and enums are in `$defs`.
 */
export function dataSchemaText(message: DescMessage, annotations: { title: string; description: string }): string {
  const definitions: Definitions = new Map();
  const object = objectSchema(message, definitions);
  object.properties = { ...(object.properties as JsonSchema), _test: TEST_FLAG };
  const root: JsonSchema = { $schema: DRAFT_2020_12, ...annotations, ...object };
  if (definitions.size > 0) root.$defs = Object.fromEntries(definitions);
  return JSON.stringify(root);
}

function objectSchema(message: DescMessage, definitions: Definitions): JsonSchema {
  const properties = Object.fromEntries(
    message.fields.map((field) => [field.jsonName, fieldSchema(field, definitions)]),
  );
  const required = message.fields.map((field) => field.jsonName);
  return { type: "object", properties, ...(required.length > 0 && { required }), additionalProperties: true };
}

function fieldSchema(field: DescField, definitions: Definitions): JsonSchema {
  switch (field.fieldKind) {
    case "list":
      return { type: "array", items: valueSchema(elementKind(field), definitions) };
    case "map":
      return {
        type: "object",
        ...mapKeySchema(field.mapKey),
        additionalProperties: valueSchema(elementKind(field), definitions),
      };
    case "scalar": {
      const schema = scalarSchema(field.scalar);
      return field.presence === IMPLICIT && !field.oneof ? schema : nullable(schema);
    }
    case "enum": {
      const schema = enumSchema(field.enum, definitions);
      return field.presence === IMPLICIT && !field.oneof ? schema : nullable(schema);
    }
    case "message":
      return nullable(messageSchema(field.message, definitions));
  }
}

function elementKind(field: DescField & { fieldKind: "list" | "map" }): ValueKind {
  const kind = field.fieldKind === "list" ? field.listKind : field.mapKind;
  if (kind === "enum") return { enum: field.enum as DescEnum };
  if (kind === "message") return { message: field.message as DescMessage };
  return { scalar: field.scalar as ScalarType };
}

function valueSchema(kind: ValueKind, definitions: Definitions): JsonSchema {
  if ("enum" in kind) return enumSchema(kind.enum, definitions);
  if ("message" in kind) return messageSchema(kind.message, definitions);
  return scalarSchema(kind.scalar);
}

function scalarSchema(type: ScalarType): JsonSchema {
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { anyOf: [{ type: "number" }, { enum: ["NaN", "Infinity", "-Infinity"] }] };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "string", pattern: SIGNED_INTEGER_TEXT };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "string", pattern: UNSIGNED_INTEGER_TEXT };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", minimum: 0, maximum: 4_294_967_295 };
    default:
      return { type: "integer", minimum: -2_147_483_648, maximum: 2_147_483_647 };
  }
}

/** Map keys are JSON member names: integer and boolean keys written as text. */
function mapKeySchema(type: ScalarType): JsonSchema {
  switch (type) {
    case ScalarType.STRING:
      return {};
    case ScalarType.BOOL:
      return { propertyNames: { enum: ["true", "false"] } };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { propertyNames: { pattern: UNSIGNED_INTEGER_TEXT } };
    default:
      return { propertyNames: { pattern: SIGNED_INTEGER_TEXT } };
  }
}

/** An enum as its number, one of its values (each titled with its name); NullValue is written as null. */
function enumSchema(descriptor: DescEnum, definitions: Definitions): JsonSchema {
  if (descriptor.typeName === "google.protobuf.NullValue") return { type: "null" };
  return definedAs(descriptor.typeName, definitions, () => {
    const values = descriptor.values.filter(
      (value, index) => descriptor.values.findIndex((other) => other.number === value.number) === index,
    );
    return { type: "integer", oneOf: values.map((value) => ({ const: value.number, title: value.name })) };
  });
}

function messageSchema(message: DescMessage, definitions: Definitions): JsonSchema {
  if (isWrapperDesc(message)) return scalarSchema(message.fields[0].scalar);
  if (message.typeName.startsWith("google.protobuf.")) return WELL_KNOWN[message.typeName] ?? { type: "object" };
  return definedAs(message.typeName, definitions, () => objectSchema(message, definitions));
}

/** A `$ref` to the definition of a type, made on first use (a message may contain itself). */
function definedAs(typeName: string, definitions: Definitions, define: () => JsonSchema): JsonSchema {
  if (!definitions.has(typeName)) {
    const definition: JsonSchema = {};
    definitions.set(typeName, definition);
    Object.assign(definition, define());
  }
  return { $ref: `#/$defs/${typeName}` };
}

/** The schema that also admits null (an unset message, optional or oneof field). */
function nullable(schema: JsonSchema): JsonSchema {
  const keywords = Object.keys(schema);
  if (keywords.length === 0 || schema.type === "null") return schema;
  const restrictsValues = keywords.some((keyword) => ["enum", "const", "oneOf", "anyOf", "$ref"].includes(keyword));
  if (typeof schema.type === "string" && !restrictsValues) return { ...schema, type: [schema.type, "null"] };
  if (keywords.length === 1 && Array.isArray(schema.anyOf)) return { anyOf: [...schema.anyOf, { type: "null" }] };
  return { anyOf: [schema, { type: "null" }] };
}
