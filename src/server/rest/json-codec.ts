import {
  type DescEnum,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  type Message,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { FieldViolation } from "../../platform/errors.js";
import { formatTimeSpan, parseDateSpan } from "./date-span.js";

const DURATION = "google.protobuf.Duration";
const TIMESTAMP = "google.protobuf.Timestamp";
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

const INT32_TYPES = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);
const UINT32_TYPES = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT64_TYPES = new Set([
  ScalarType.INT64,
  ScalarType.SINT64,
  ScalarType.SFIXED64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
]);

export function fieldByJsonKey(message: DescMessage, key: string): DescField | undefined {
  return message.fields.find((field) => field.jsonName === key || field.name === key);
}

/**
 * Checks a REST request's JSON against the message and rewrites it into protobuf JSON: date-spans become
 * `Ns`, timestamps are normalized, int32 strings become numbers, nulls and unknown fields are dropped.
 * Every type mismatch is reported as a field violation with its JSON path.
 */
export function decodeRequest<T extends DescMessage>(
  schema: T,
  json: JsonObject,
): { message: Message & { $typeName: T["typeName"] } } | { violations: FieldViolation[] } {
  const violations: FieldViolation[] = [];
  const normalized = normalizeMessage(schema, json, "", violations);
  if (violations.length > 0) return { violations };
  try {
    return { message: fromJson(schema, normalized as JsonValue, { ignoreUnknownFields: true }) as never };
  } catch (error) {
    return { violations: [{ field: "", message: error instanceof Error ? error.message : String(error) }] };
  }
}

function normalizeMessage(
  message: DescMessage,
  value: JsonValue,
  path: string,
  violations: FieldViolation[],
): JsonValue | undefined {
  if (message.typeName === DURATION) return normalizeDuration(value, path, violations);
  if (message.typeName === TIMESTAMP) return normalizeTimestamp(value, path, violations);
  if (message.typeName.startsWith("google.protobuf.")) return value;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    violations.push({ field: path, message: "must be an object" });
    return undefined;
  }
  const result: JsonObject = {};
  for (const [key, fieldValue] of Object.entries(value)) {
    const field = fieldByJsonKey(message, key);
    if (!field || fieldValue === null) continue;
    const normalized = normalizeField(field, fieldValue, join(path, field.jsonName), violations);
    if (normalized !== undefined) result[field.jsonName] = normalized;
  }
  return result;
}

function normalizeField(
  field: DescField,
  value: JsonValue,
  path: string,
  violations: FieldViolation[],
): JsonValue | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return normalizeScalar(field.scalar, value, path, violations);
    case "enum":
      return normalizeEnum(field.enum, value, path, violations);
    case "message":
      return normalizeMessage(field.message, value, path, violations);
    case "list": {
      if (!Array.isArray(value)) {
        violations.push({ field: path, message: "must be an array" });
        return undefined;
      }
      return value.map((element, index) => {
        const elementPath = `${path}[${index}]`;
        if (field.listKind === "scalar") return normalizeScalar(field.scalar, element, elementPath, violations) ?? null;
        if (field.listKind === "enum") return normalizeEnum(field.enum, element, elementPath, violations) ?? null;
        return normalizeMessage(field.message, element, elementPath, violations) ?? null;
      });
    }
    case "map": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        violations.push({ field: path, message: "must be an object" });
        return undefined;
      }
      const result: JsonObject = {};
      for (const [key, entry] of Object.entries(value)) {
        const entryPath = `${path}.${key}`;
        const normalized =
          field.mapKind === "scalar"
            ? normalizeScalar(field.scalar, entry, entryPath, violations)
            : field.mapKind === "enum"
              ? normalizeEnum(field.enum, entry, entryPath, violations)
              : normalizeMessage(field.message, entry, entryPath, violations);
        if (normalized !== undefined) result[key] = normalized;
      }
      return result;
    }
  }
}

function normalizeScalar(
  type: ScalarType,
  value: JsonValue,
  path: string,
  violations: FieldViolation[],
): JsonValue | undefined {
  const fail = (message: string) => {
    violations.push({ field: path, message });
    return undefined;
  };
  switch (type) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return typeof value === "string" ? value : fail("must be a string");
    case ScalarType.BOOL:
      return typeof value === "boolean" ? value : fail("must be true or false");
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      // Quantities only: protobuf's "NaN" and "Infinity" are refused, and so is 1e400, which JSON makes Infinity.
      if (typeof value === "number" && Number.isFinite(value)) return value;
      if (typeof value === "string" && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(value)) {
        const number = Number(value);
        if (Number.isFinite(number)) return number;
      }
      return fail("must be a finite number");
  }
  const text = typeof value === "number" ? String(value) : typeof value === "string" ? value.trim() : "";
  if (!/^-?\d+$/.test(text)) return fail("must be a whole number");
  const number = BigInt(text);
  if (INT32_TYPES.has(type) && (number < -2147483648n || number > 2147483647n))
    return fail("is out of the int32 range");
  if (UINT32_TYPES.has(type) && (number < 0n || number > 4294967295n)) return fail("is out of the uint32 range");
  if (INT64_TYPES.has(type)) {
    const unsigned = type === ScalarType.UINT64 || type === ScalarType.FIXED64;
    const [min, max] = unsigned ? [0n, 18446744073709551615n] : [-9223372036854775808n, 9223372036854775807n];
    return number < min || number > max ? fail("is out of the int64 range") : number.toString();
  }
  return Number(number);
}

function normalizeEnum(
  descriptor: DescEnum,
  value: JsonValue,
  path: string,
  violations: FieldViolation[],
): JsonValue | undefined {
  const number = typeof value === "string" && /^-?\d+$/.test(value) ? Number(value) : value;
  if (typeof number === "number" && Number.isInteger(number) && number >= -2147483648 && number <= 2147483647) {
    return number;
  }
  if (typeof value === "string" && descriptor.values.some((candidate) => candidate.name === value)) return value;
  violations.push({ field: path, message: "must be an integer enumeration value" });
  return undefined;
}

function normalizeDuration(value: JsonValue, path: string, violations: FieldViolation[]): JsonValue | undefined {
  if (typeof value !== "string") {
    violations.push({ field: path, message: "must be a duration string such as 1.02:03:04, P1DT2H or 3600s" });
    return undefined;
  }
  try {
    const span = parseDateSpan(value);
    const nanos = Math.abs(span.nanos);
    const negative = span.seconds < 0n || span.nanos < 0;
    const seconds = span.seconds < 0n ? -span.seconds : span.seconds;
    return `${negative ? "-" : ""}${seconds}${nanos ? `.${String(nanos).padStart(9, "0")}` : ""}s`;
  } catch (error) {
    violations.push({ field: path, message: error instanceof Error ? error.message : "is not a duration" });
    return undefined;
  }
}

function normalizeTimestamp(value: JsonValue, path: string, violations: FieldViolation[]): JsonValue | undefined {
  const normalized = typeof value === "string" ? rfc3339ToUtc(value) : undefined;
  if (normalized === undefined) {
    violations.push({
      field: path,
      message: "must be an RFC 3339 date-time such as 2026-01-31T12:00:00Z (years 0001-9999)",
    });
  }
  return normalized;
}

/** An RFC 3339 date-time as the REST decoder takes it into a Timestamp field; undefined when it refuses it. */
export function timestampOfText(value: string): Timestamp | undefined {
  const normalized = rfc3339ToUtc(value);
  return normalized === undefined ? undefined : fromJson(TimestampSchema, normalized);
}

/** `value` as an RFC 3339 UTC timestamp with its fraction kept to the nanosecond, or undefined when invalid. */
function rfc3339ToUtc(value: string): string | undefined {
  const match = RFC3339.exec(value);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction, offset] = match;
  const fields = [year, month, day, hour, minute, second].map(Number);
  const [y, mo, d, h, mi, se] = fields;
  const midnight = new Date(Date.UTC(y, mo - 1, d));
  midnight.setUTCFullYear(y);
  if (midnight.getUTCMonth() !== mo - 1 || midnight.getUTCDate() !== d || h > 23 || mi > 59 || se > 59)
    return undefined;
  let offsetMinutes = 0;
  if (offset && offset.toUpperCase() !== "Z") {
    const [offsetHours, offsetMins] = offset.slice(1).split(":").map(Number);
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (offset.startsWith("-") ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const utc = new Date(midnight.getTime() + ((h * 60 + mi - offsetMinutes) * 60 + se) * 1000);
  if (utc.getUTCFullYear() < 1 || utc.getUTCFullYear() > 9999) return undefined;
  const iso = utc
    .toISOString()
    .replace(/^\+0*(\d{4})/, "$1")
    .slice(0, 19);
  return `${iso}${fraction ? `.${fraction.padEnd(9, "0")}` : ""}Z`;
}

/**
 * The REST JSON of a message: every field present (unset messages and optionals as null), enums as integers,
 * durations as .NET TimeSpan strings. Responses are written by `encodeResponseText` (json-encoder.ts), which
 * gives this text in one pass; this stays as its reference and its path for the rarer well-known types.
 */
export function encodeResponse(schema: DescMessage, message: Message): JsonValue {
  const json = toJson(schema, message, { alwaysEmitImplicit: true, enumAsInteger: true });
  return completeMessage(schema, json);
}

function completeMessage(message: DescMessage, value: JsonValue): JsonValue {
  if (message.typeName === DURATION) return typeof value === "string" ? timeSpanOf(value) : value;
  if (message.typeName.startsWith("google.protobuf.")) return value;
  const object = value as JsonObject;
  const complete: JsonObject = {};
  for (const field of message.fields) {
    const fieldValue = object[field.jsonName];
    if (fieldValue === undefined || fieldValue === null) {
      complete[field.jsonName] = field.fieldKind === "list" ? [] : field.fieldKind === "map" ? {} : null;
    } else if (field.fieldKind === "message") {
      complete[field.jsonName] = completeMessage(field.message, fieldValue);
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      complete[field.jsonName] = (fieldValue as JsonValue[]).map((element) => completeMessage(field.message, element));
    } else if (field.fieldKind === "map" && field.mapKind === "message") {
      const entries = Object.entries(fieldValue as JsonObject);
      complete[field.jsonName] = Object.fromEntries(
        entries.map(([key, entry]) => [key, completeMessage(field.message, entry)]),
      );
    } else {
      complete[field.jsonName] = fieldValue;
    }
  }
  return complete;
}

function timeSpanOf(protobufDuration: string): string {
  const match = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(protobufDuration);
  if (!match) return protobufDuration;
  const sign = match[1] ? -1n : 1n;
  const nanos = Number((match[3] ?? "").padEnd(9, "0"));
  return formatTimeSpan({ seconds: sign * BigInt(match[2]), nanos: match[1] ? -nanos : nanos });
}

/** Converts a query-string or path value to the JSON type of the field it names. */
export function jsonFromText(field: DescField, text: string): JsonValue {
  const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind;
  if (kind === "scalar") {
    const scalar = (field as { scalar: ScalarType }).scalar;
    if (scalar === ScalarType.BOOL) {
      const lower = text.toLowerCase();
      return lower === "true" || lower === "1" ? true : lower === "false" || lower === "0" ? false : text;
    }
    // A double's or float's text is decoded as a JSON string is: decimal notation only (no hex, no blanks).
    return text;
  }
  if (kind === "enum") return /^-?\d+$/.test(text) ? Number(text) : text;
  return text;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}
