import { setImmediate as nextTurn } from "node:timers/promises";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import type { FieldViolation } from "../../platform/errors.js";
import { decodeRequest, encodeResponse } from "./json-codec.js";

/** Elements of a list decoded or encoded between two turns of the event loop. */
const CHUNK = 100;

type ListField = DescField & { fieldKind: "list"; listKind: "message"; message: DescMessage };

function longLists(schema: DescMessage, json: JsonObject): ListField[] {
  return schema.fields.filter(
    (field): field is ListField =>
      field.fieldKind === "list" &&
      field.listKind === "message" &&
      Array.isArray(json[field.jsonName]) &&
      (json[field.jsonName] as JsonValue[]).length > CHUNK,
  );
}

/**
 * `decodeRequest`, but a top-level list of messages longer than a chunk (an import's products) is decoded
 * element by element, letting other requests run between chunks: no request holds the event loop for long.
 */
export async function decodeRequestInChunks(
  schema: DescMessage,
  json: JsonObject,
): Promise<{ message: Message } | { violations: FieldViolation[] }> {
  const lists = longLists(schema, json);
  if (lists.length === 0) return decodeRequest(schema, json);
  const rest = { ...json };
  for (const field of lists) delete rest[field.jsonName];
  const decoded = decodeRequest(schema, rest);
  if ("violations" in decoded) return decoded;
  const target = decoded.message as unknown as Record<string, Message[]>;
  for (const field of lists) {
    const elements = json[field.jsonName] as JsonValue[];
    const violations: FieldViolation[] = [];
    for (let index = 0; index < elements.length; index++) {
      if (index % CHUNK === 0) await nextTurn();
      const element = elements[index];
      if (element === null) continue;
      const path = `${field.jsonName}[${index}]`;
      if (typeof element !== "object" || Array.isArray(element)) {
        violations.push({ field: path, message: "must be an object" });
        continue;
      }
      const item = decodeRequest(field.message, element);
      if ("violations" in item) violations.push(...item.violations.map((violation) => prefixed(path, violation)));
      else target[field.localName].push(item.message);
    }
    if (violations.length > 0) return { violations };
  }
  return decoded;
}

/** `encodeResponse`, a chunk of a long top-level list at a time, with turns of the event loop in between. */
export async function encodeResponseInChunks(schema: DescMessage, message: Message): Promise<JsonValue> {
  const source = message as unknown as Record<string, Message[]>;
  const lists = schema.fields.filter(
    (field): field is ListField =>
      field.fieldKind === "list" && field.listKind === "message" && source[field.localName].length > CHUNK,
  );
  if (lists.length === 0) return encodeResponse(schema, message);
  const head = { ...source } as Record<string, unknown>;
  for (const field of lists) head[field.localName] = [];
  const json = encodeResponse(schema, head as unknown as Message) as JsonObject;
  for (const field of lists) {
    const encoded: JsonValue[] = [];
    const elements = source[field.localName];
    for (let index = 0; index < elements.length; index++) {
      if (index % CHUNK === 0) await nextTurn();
      encoded.push(encodeResponse(field.message, elements[index]));
    }
    json[field.jsonName] = encoded;
  }
  return json;
}

function prefixed(path: string, violation: FieldViolation): FieldViolation {
  return { ...violation, field: violation.field ? `${path}.${violation.field}` : path };
}
