import { setImmediate as nextTurn } from "node:timers/promises";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import type { FieldViolation } from "../../platform/errors.js";
import { decodeRequest } from "./json-codec.js";
import { encodedFields, encodeResponseText } from "./json-encoder.js";
import { decodeSessionEvent } from "./session-event-decoder.js";

/** Elements of a list decoded or encoded between two turns of the event loop. */
const CHUNK = 100;

type ListField = DescField & { fieldKind: "list"; listKind: "message"; message: DescMessage };

/** Element types with a decoder of their own for their plain JSON (see session-event-decoder.ts). */
const ELEMENT_DECODERS = new Map<string, (json: JsonObject) => Message | undefined>([
  ["provision.v1.SessionEvent", decodeSessionEvent],
]);

/** Lists of messages decoded element by element: those longer than a chunk, and any whose elements have a decoder. */
function elementwiseLists(schema: DescMessage, json: JsonObject): ListField[] {
  return schema.fields.filter(
    (field): field is ListField =>
      field.fieldKind === "list" &&
      field.listKind === "message" &&
      Array.isArray(json[field.jsonName]) &&
      ((json[field.jsonName] as JsonValue[]).length > CHUNK || ELEMENT_DECODERS.has(field.message.typeName)),
  );
}

/**
 * `decodeRequest`, but a top-level list of messages longer than a chunk (an import's products) is decoded
 * element by element, letting other requests run between chunks: no request holds the event loop for long. So is
 * a list whose elements have a decoder of their own, which takes each element it can and leaves the rest to
 * `decodeRequest`.
 */
export async function decodeRequestInChunks(
  schema: DescMessage,
  json: JsonObject,
): Promise<{ message: Message } | { violations: FieldViolation[] }> {
  const lists = elementwiseLists(schema, json);
  if (lists.length === 0) return decodeRequest(schema, json);
  const rest = { ...json };
  for (const field of lists) delete rest[field.jsonName];
  const decoded = decodeRequest(schema, rest);
  if ("violations" in decoded) return decoded;
  const target = decoded.message as unknown as Record<string, Message[]>;
  for (const field of lists) {
    const elements = json[field.jsonName] as JsonValue[];
    const violations: FieldViolation[] = [];
    const decodePlain = ELEMENT_DECODERS.get(field.message.typeName);
    for (let index = 0; index < elements.length; index++) {
      if (index % CHUNK === 0 && index > 0) await nextTurn();
      const element = elements[index];
      if (element === null) continue;
      const path = `${field.jsonName}[${index}]`;
      if (typeof element !== "object" || Array.isArray(element)) {
        violations.push({ field: path, message: "must be an object" });
        continue;
      }
      const plain = decodePlain?.(element);
      if (plain) {
        target[field.localName].push(plain);
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

/**
 * The REST JSON text of a response, or of its `responseBody` field alone when one is named; a top-level list of
 * messages longer than a chunk is written a chunk at a time, with turns of the event loop in between. Any other
 * response is answered at once, as text rather than a promise.
 */
export function encodeResponseInChunks(
  schema: DescMessage,
  message: Message,
  responseBody = "",
): string | Promise<string> {
  const source = message as unknown as Record<string, Message[]>;
  const isLong = (field: DescField): field is ListField =>
    field.fieldKind === "list" &&
    field.listKind === "message" &&
    !field.message.typeName.startsWith("google.protobuf.") &&
    source[field.localName].length > CHUNK;
  const fields = encodedFields(schema);
  const body = responseBody ? fields.find(({ field }) => field.name === responseBody) : undefined;
  if (body) return isLong(body.field) ? listInChunks(body.field, source) : body.text(message);
  if (!fields.some(({ field }) => isLong(field))) return encodeResponseText(schema, message);
  return fieldsInChunks(fields, isLong, message, source);
}

async function fieldsInChunks(
  fields: ReturnType<typeof encodedFields>,
  isLong: (field: DescField) => field is ListField,
  message: Message,
  source: Record<string, Message[]>,
): Promise<string> {
  let json = "";
  for (const { field, key, text } of fields) {
    json += `${json ? "," : "{"}${key}${isLong(field) ? await listInChunks(field, source) : text(message)}`;
  }
  return `${json}}`;
}

async function listInChunks(field: ListField, source: Record<string, Message[]>): Promise<string> {
  const elements = source[field.localName];
  const encoded: string[] = [];
  for (let index = 0; index < elements.length; index++) {
    if (index % CHUNK === 0) await nextTurn();
    encoded.push(encodeResponseText(field.message, elements[index]));
  }
  return `[${encoded.join(",")}]`;
}

function prefixed(path: string, violation: FieldViolation): FieldViolation {
  return { ...violation, field: violation.field ? `${path}.${violation.field}` : path };
}
