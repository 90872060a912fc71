import {
  type DescEnum,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonValue,
  type Message,
  protoInt64,
  ScalarType,
} from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";
import { jsonText } from "../../platform/json-text.js";
import { encodeResponse } from "./json-codec.js";
import { durationText, type Span, timestampText } from "./well-known-text.js";

/** A field or list element's value (as the message holds it) as JSON text. */
type Write = (value: unknown) => string;
type Fields = Record<string, unknown>;

/** One field of a compiled message: its key and how to write its value from the message holding it. */
export interface EncodedField {
  readonly field: DescField;
  /** `"jsonName":` */
  readonly key: string;
  readonly text: (message: Message) => string;
}

interface MessageEncoder {
  /** Empty for well-known types, which are not written field by field. */
  readonly fields: readonly EncodedField[];
  readonly text: Write;
}

const DURATION = "google.protobuf.Duration";
const TIMESTAMP = "google.protobuf.Timestamp";
const STRUCT = "google.protobuf.Struct";
/** Presence of a proto3 scalar without `optional`: it is always written. */
const IMPLICIT = 2;

const encoders = new WeakMap<DescMessage, MessageEncoder>();
const frozenTexts = new WeakMap<object, string>();

/**
 * The REST JSON text of a message, exactly `JSON.stringify(encodeResponse(schema, message))` in one pass:
 * the writer of each message type is compiled from its descriptor once, on first use.
 */
export function encodeResponseText(schema: DescMessage, message: Message): string {
  return encoderOf(schema).text(message);
}

/** The compiled fields of a message type that is not a well-known type, in descriptor order. */
export function encodedFields(schema: DescMessage): readonly EncodedField[] {
  return encoderOf(schema).fields;
}

function encoderOf(schema: DescMessage): MessageEncoder {
  let encoder = encoders.get(schema);
  if (!encoder) {
    encoder = compileMessage(schema);
    encoders.set(schema, encoder);
  }
  return encoder;
}

function compileMessage(schema: DescMessage): MessageEncoder {
  if (schema.typeName.startsWith("google.protobuf.")) return { fields: [], text: wellKnownWriter(schema) };
  const fields = schema.fields.map(compileField);
  if (fields.length === 0) return { fields, text: () => "{}" };
  const openers = fields.map((field, index) => (index === 0 ? "{" : ",") + field.key);
  const write = (message: unknown): string => {
    let json = "";
    for (let index = 0; index < fields.length; index++) {
      json += openers[index] + fields[index].text(message as Message);
    }
    return `${json}}`;
  };
  return {
    fields,
    text: (message) => (Object.isFrozen(message) ? frozenText(message as object, write) : write(message)),
  };
}

/**
 * A frozen message (a cached product is deep-frozen and shared by every answer) cannot change, so its text is
 * written once and kept for as long as the message lives.
 */
function frozenText(message: object, write: Write): string {
  let text = frozenTexts.get(message);
  if (text === undefined) {
    text = write(message);
    frozenTexts.set(message, text);
  }
  return text;
}

function compileField(field: DescField): EncodedField {
  const key = `${JSON.stringify(field.jsonName)}:`;
  const name = field.localName;
  switch (field.fieldKind) {
    case "list": {
      const write = listWriter(field);
      return { field, key, text: (message) => write((message as unknown as Fields)[name]) };
    }
    case "map": {
      const write = mapWriter(field);
      return { field, key, text: (message) => write((message as unknown as Fields)[name]) };
    }
  }
  const write = singularWriter(field);
  if (field.oneof) {
    const oneof = field.oneof.localName;
    return {
      field,
      key,
      text: (message) => {
        const selected = (message as unknown as Record<string, { case?: string; value?: unknown }>)[oneof];
        return selected.case === name ? write(selected.value) : "null";
      },
    };
  }
  if (field.presence === IMPLICIT)
    return { field, key, text: (message) => write((message as unknown as Fields)[name]) };
  return {
    field,
    key,
    text: (message) => {
      const value = (message as unknown as Fields)[name];
      return value === undefined || !Object.hasOwn(message, name) ? "null" : write(value);
    },
  };
}

function singularWriter(field: DescField & { fieldKind: "scalar" | "enum" | "message" }): Write {
  switch (field.fieldKind) {
    case "scalar":
      return scalarWriter(field, field.scalar);
    case "enum":
      return enumWriter(field, field.enum);
    case "message":
      if (field.oneof || !isWrapperDesc(field.message)) return messageWriter(field.message);
      // A wrapper in a singular field holds its bare value.
      return scalarWriter(field, field.message.fields[0].scalar);
  }
}

function elementWriter(field: DescField & { fieldKind: "list" | "map" }): Write {
  const kind = field.fieldKind === "list" ? field.listKind : field.mapKind;
  if (kind === "scalar") return scalarWriter(field, field.scalar as ScalarType);
  if (kind === "enum") return enumWriter(field, field.enum as DescEnum);
  return messageWriter(field.message as DescMessage);
}

function listWriter(field: DescField & { fieldKind: "list" }): Write {
  const write = elementWriter(field);
  return (value) => {
    const list = value as unknown[];
    if (list.length === 0) return "[]";
    let json = `[${write(list[0])}`;
    for (let index = 1; index < list.length; index++) json += `,${write(list[index])}`;
    return `${json}]`;
  };
}

/**
 * Entries are gathered in an object as toJson does, so keys come out in the same order and the same ones are
 * dropped (`__proto__`); keys of other types than string are written as toJson converts them.
 */
function mapWriter(field: DescField & { fieldKind: "map" }): Write {
  const write = elementWriter(field);
  const keyOf = mapKeyWriter(field.mapKey);
  return (value) => {
    const map = value as Fields;
    const keys = Object.keys(map);
    if (keys.length === 0) return "{}";
    const entries: Record<string, string> = {};
    for (const key of keys) entries[keyOf(key)] = write(map[key]);
    let json = "";
    for (const key of Object.keys(entries)) json += `${json ? "," : "{"}${JSON.stringify(key)}:${entries[key]}`;
    return json ? `${json}}` : "{}";
  };
}

function mapKeyWriter(type: ScalarType): (key: string) => string {
  switch (type) {
    case ScalarType.STRING:
    case ScalarType.BOOL:
      return (key) => key;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return (key) => parsedOr(key, protoInt64.parse);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return (key) => parsedOr(key, protoInt64.uParse);
    default: {
      return (key) => {
        // biome-ignore lint/correctness/useParseIntRadix: read as protobuf-es reads a key, "0x" prefix included
        const number = Number.parseInt(key);
        return Number.isFinite(number) ? String(number) : key;
      };
    }
  }
}

function parsedOr(key: string, parse: (text: string) => bigint | string): string {
  try {
    return String(parse(key));
  } catch {
    return key;
  }
}

function messageWriter(schema: DescMessage): Write {
  if (schema.typeName === STRUCT) return structWriter(schema);
  let text: Write | undefined;
  return (value) => {
    if (value === undefined) return "null";
    // Resolved on first use: a message type may contain itself.
    text ??= encoderOf(schema).text;
    return text(value);
  };
}

function scalarWriter(field: DescField, type: ScalarType): Write {
  const fail = (value: unknown): never => {
    throw new Error(`cannot encode ${field} to JSON: unexpected ${typeof value}`);
  };
  switch (type) {
    case ScalarType.STRING:
      return (value) => (typeof value === "string" ? jsonText(value) : fail(value));
    case ScalarType.BOOL:
      return (value) => (typeof value === "boolean" ? (value ? "true" : "false") : fail(value));
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return (value) => (typeof value === "number" ? floatText(value) : fail(value));
    case ScalarType.BYTES:
      return (value) => (value instanceof Uint8Array ? `"${base64Encode(value)}"` : fail(value));
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return (value) => {
        if (typeof value === "bigint") return `"${value}"`;
        if (typeof value === "string") return jsonText(value);
        return typeof value === "number" && Number.isInteger(value) ? `"${value}"` : fail(value);
      };
    default:
      return (value) => (typeof value === "number" ? numberText(value) : fail(value));
  }
}

function enumWriter(field: DescField, descriptor: DescEnum): Write {
  const isNull = descriptor.typeName === "google.protobuf.NullValue";
  return (value) => {
    if (typeof value !== "number") throw new Error(`cannot encode ${field} to JSON: unexpected ${typeof value}`);
    return isNull ? "null" : numberText(value);
  };
}

/** JSON.stringify of a number: NaN and the infinities are null. */
function numberText(value: number): string {
  return Number.isFinite(value) ? String(value) : "null";
}

/** protobuf JSON of a float or double: NaN and the infinities are strings. */
function floatText(value: number): string {
  if (Number.isFinite(value)) return String(value);
  return Number.isNaN(value) ? '"NaN"' : value > 0 ? '"Infinity"' : '"-Infinity"';
}

/**
 * Durations, timestamps and wrappers are written here; values toJson refuses or would write oddly, and
 * every other well-known type, take the reference path, so they are written (or refused) exactly as before.
 */
function wellKnownWriter(schema: DescMessage): Write {
  const reference: Write = (value) => JSON.stringify(encodeResponse(schema, value as Message));
  if (schema.typeName === DURATION) return (value) => durationText(value as Span) ?? reference(value);
  if (schema.typeName === TIMESTAMP) return (value) => timestampText(value as Span) ?? reference(value);
  if (isWrapperDesc(schema)) {
    const write = scalarWriter(schema.fields[0], schema.fields[0].scalar);
    return (value) => write((value as { value: unknown }).value);
  }
  return reference;
}

/** A Struct outside google.protobuf.Value holds a JSON object; it goes the reference path. */
function structWriter(schema: DescMessage): Write {
  return (value) =>
    value === undefined ? "null" : JSON.stringify(encodeResponse(schema, fromJson(schema, value as JsonValue)));
}
