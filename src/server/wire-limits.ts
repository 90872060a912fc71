import type { DescField, DescMessage } from "@bufbuild/protobuf";
import type { FieldViolation } from "../platform/errors.js";
import {
  capOf,
  elementMessage,
  MAX_DECODED_MESSAGES,
  MAX_REPORTED,
  mapKey,
  tooManyItems,
  tooManyMessages,
} from "./request-limits.js";

/** What one message's fields are, by number, with their caps (0: none). */
interface WireField {
  field: DescField;
  cap: number;
  /** The element (or value) message type, for fields of messages. */
  element?: DescMessage;
}

interface Scan {
  out: FieldViolation[];
  messages: number;
  /** Not protobuf as its schema reads it: left to the decoder, which answers it. */
  malformed: boolean;
}

const fieldTables = new WeakMap<DescMessage, Map<number, WireField>>();
const utf8 = new TextDecoder();

/**
 * The caps of a request message in the protobuf binary format, checked on the encoded bytes before any of it is
 * decoded (as checkMessageLimits checks a decoded one, naming the same fields), and the number of messages it
 * holds bounded by MAX_DECODED_MESSAGES: decoding hundreds of thousands of small messages would hold the event
 * loop for seconds. Bytes that stop reading as the schema are checked up to there; the decoder answers the rest.
 */
export function checkWireLimits(schema: DescMessage, bytes: Uint8Array): FieldViolation[] {
  const scan: Scan = { out: [], messages: 0, malformed: false };
  visit(schema, bytes, 0, bytes.length, "", scan);
  if (scan.messages > MAX_DECODED_MESSAGES) return [tooManyMessages()];
  return scan.out;
}

function visit(schema: DescMessage, bytes: Uint8Array, start: number, end: number, path: string, scan: Scan): void {
  const fields = fieldTableOf(schema);
  const counts = new Map<number, number>();
  const nested = new Map<number, number[]>();
  let at = start;
  while (at < end && !scan.malformed) {
    const read = readField(bytes, at, end);
    if (!read) {
      fail(scan);
      break;
    }
    const { number, wireType, from } = read;
    at = read.to;
    const known = fields.get(number);
    const container = known && (known.field.fieldKind === "list" || known.field.fieldKind === "map");
    if (wireType === 2) {
      const count = (counts.get(number) ?? 0) + (container ? elementsIn(known, bytes, from, at) : 1);
      counts.set(number, count);
      // Elements past a cap are refused for the cap, not counted as messages to decode.
      if (known?.element && (!known.cap || count <= known.cap)) {
        if (++scan.messages > MAX_DECODED_MESSAGES) return;
        const slices = nested.get(number) ?? [];
        slices.push(from, at);
        nested.set(number, slices);
      }
      continue;
    }
    const skipped = skip(bytes, at, end, wireType, number);
    if (skipped === undefined) {
      fail(scan);
      break;
    }
    at = skipped;
    if (container) counts.set(number, (counts.get(number) ?? 0) + 1);
  }
  // Bytes that stop reading as the schema still have their caps checked on what came before: a decoder would
  // build all of that before it failed.
  for (const [number, { field, cap, element }] of fields) {
    if (scan.out.length >= MAX_REPORTED || scan.messages > MAX_DECODED_MESSAGES) return;
    const count = counts.get(number) ?? 0;
    const fieldPath = path + field.jsonName;
    if (cap && count > cap) {
      scan.out.push(tooManyItems(fieldPath, count, cap));
      continue;
    }
    const slices = nested.get(number);
    if (!element || !slices || scan.malformed) continue;
    for (let index = 0; index < slices.length; index += 2) {
      const [from, to] = [slices[index], slices[index + 1]];
      if (field.fieldKind === "list") visit(element, bytes, from, to, `${fieldPath}[${index / 2}].`, scan);
      else if (field.fieldKind === "map") visitMapValue(field, element, bytes, from, to, fieldPath, scan);
      else visit(element, bytes, from, to, `${fieldPath}.`, scan);
    }
  }
}

/** A map entry's value message (field 2), named by the entry's key (field 1) as checkMessageLimits names it. */
function visitMapValue(
  field: DescField,
  element: DescMessage,
  bytes: Uint8Array,
  start: number,
  end: number,
  fieldPath: string,
  scan: Scan,
): void {
  let key: string | number = field.fieldKind === "map" && field.mapKey === 9 ? "" : 0;
  let value: [number, number] | undefined;
  for (let at = start; at < end; ) {
    const read = readField(bytes, at, end);
    if (!read) {
      fail(scan);
      return;
    }
    const { number, wireType, from, to } = read;
    at = to;
    if (wireType === 2) {
      if (number === 1) key = utf8.decode(bytes.subarray(from, to));
      if (number === 2) value = [from, to];
      continue;
    }
    const varintKey = wireType === 0 && number === 1 ? readVarint(bytes, at, end) : undefined;
    if (varintKey) {
      key = varintKey.value;
      at = varintKey.next;
      continue;
    }
    const skipped = skip(bytes, at, end, wireType, number);
    if (skipped === undefined) {
      fail(scan);
      return;
    }
    at = skipped;
  }
  visit(element, bytes, value?.[0] ?? 0, value?.[1] ?? 0, `${fieldPath}${mapKey(String(key))}.`, scan);
}

/** Elements one length-delimited record of a repeated field adds: one, or a packed run's values. */
function elementsIn(known: WireField, bytes: Uint8Array, from: number, to: number): number {
  const { field } = known;
  if (field.fieldKind !== "list" || field.listKind === "message") return 1;
  if (field.listKind === "enum") return varintsIn(bytes, from, to);
  switch (field.scalar) {
    case 9:
    case 12:
      return 1; // string, bytes: never packed
    case 1:
    case 6:
    case 16:
      return Math.floor((to - from) / 8); // double, fixed64, sfixed64
    case 2:
    case 7:
    case 15:
      return Math.floor((to - from) / 4); // float, fixed32, sfixed32
    default:
      return varintsIn(bytes, from, to);
  }
}

function varintsIn(bytes: Uint8Array, from: number, to: number): number {
  let values = 0;
  for (let at = from; at < to; at++) if (bytes[at] < 0x80) values++;
  return values;
}

/** Groups nested deeper are taken as malformed, as the decoder's recursion limit takes them. */
const MAX_GROUP_DEPTH = 100;

/** Where a field of `wireType` (not length-delimited) that starts at `at` ends; undefined when it cannot. */
function skip(
  bytes: Uint8Array,
  at: number,
  end: number,
  wireType: number,
  number: number,
  depth = 0,
): number | undefined {
  switch (wireType) {
    case 0:
      return skipVarint(bytes, at, end);
    case 1:
      return at + 8 <= end ? at + 8 : undefined;
    case 5:
      return at + 4 <= end ? at + 4 : undefined;
    case 3:
      return depth < MAX_GROUP_DEPTH ? skipGroup(bytes, at, end, number, depth + 1) : undefined;
    default:
      return undefined;
  }
}

function skipGroup(bytes: Uint8Array, start: number, end: number, number: number, depth: number): number | undefined {
  let at = start;
  while (at < end) {
    const read = readField(bytes, at, end);
    if (!read) return undefined;
    const { number: inner, wireType, from, to } = read;
    if (wireType === 4) return inner === number ? from : undefined;
    if (wireType === 2) {
      at = to;
      continue;
    }
    const skipped = skip(bytes, from, end, wireType, inner, depth);
    if (skipped === undefined) return undefined;
    at = skipped;
  }
  return undefined;
}

/** Where a varint of any value (up to 10 bytes) ends; undefined when truncated or longer. */
function skipVarint(bytes: Uint8Array, start: number, end: number): number | undefined {
  for (let at = start; at < end && at < start + 10; at++) if (bytes[at] < 0x80) return at + 1;
  return undefined;
}

/**
 * The field whose tag is at `at`: its number and wire type, and where its bytes are (`from`, after the tag, to
 * `to`): for a length-delimited field its contents, for any other the tag alone (its value is skipped apart).
 * Undefined when the tag, or a length-delimited field's length, cannot be read.
 */
function readField(
  bytes: Uint8Array,
  at: number,
  end: number,
): { number: number; wireType: number; from: number; to: number } | undefined {
  const tag = readVarint(bytes, at, end);
  if (!tag) return undefined;
  const number = Math.floor(tag.value / 8);
  const wireType = tag.value % 8;
  if (wireType !== 2) return { number, wireType, from: tag.next, to: tag.next };
  const length = readVarint(bytes, tag.next, end);
  if (!length || length.next + length.value > end) return undefined;
  return { number, wireType, from: length.next, to: length.next + length.value };
}

/** A varint of up to 53 bits (lengths, tags: never more in valid protobuf); undefined when truncated or longer. */
function readVarint(bytes: Uint8Array, start: number, end: number): { value: number; next: number } | undefined {
  let value = 0;
  let scale = 1;
  for (let at = start; at < end && at < start + 10; at++) {
    const byte = bytes[at];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return Number.isSafeInteger(value) ? { value, next: at + 1 } : undefined;
    scale *= 128;
  }
  return undefined;
}

function fail(scan: Scan): void {
  scan.malformed = true;
}

function fieldTableOf(schema: DescMessage): Map<number, WireField> {
  let table = fieldTables.get(schema);
  if (!table) {
    table = new Map(
      schema.fields.map((field) => [field.number, { field, cap: capOf(field), element: elementMessage(field) }]),
    );
    fieldTables.set(schema, table);
  }
  return table;
}
