import {
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
  getOption,
  hasOption,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import { max_items } from "../../gen/provision/v1/limits_pb.js";
import type { FieldViolation } from "../platform/errors.js";

/** One declared cap: at most `maxItems` elements in `field` of `message` per request. */
export interface ItemCap {
  /** Full protobuf name of the message declaring the field. */
  message: string;
  /** JSON name of the field. */
  field: string;
  maxItems: number;
}

/** A request over its caps is refused naming at most this many fields: the answer stays small. */
export const MAX_REPORTED = 20;

/** The fields of a message the checks visit: capped containers, and messages that hold some further down. */
interface Plan {
  field: DescField;
  /** 0 when the field declares no cap (only the elements are visited). */
  cap: number;
  /** The element message type, when it holds capped fields itself. */
  element?: DescMessage;
}

const plans = new WeakMap<DescMessage, Plan[]>();

/**
 * Messages one request may hold, nested ones included (Timestamps too): well above the largest the caps allow
 * together (an import of 1,000 products and 10,000 nested items, about 60,000), and far below what would hold the
 * event loop for seconds while decoding.
 */
export const MAX_DECODED_MESSAGES = 100_000;

/**
 * Checks the caps of `json`, the request message `schema` as JSON (already parsed, not yet decoded), so an
 * oversized list is refused without decoding it, and bounds its objects by MAX_DECODED_MESSAGES. Values of the
 * wrong JSON type are left to the decoder.
 */
export function checkJsonLimits(schema: DescMessage, json: JsonValue): FieldViolation[] {
  const violations: FieldViolation[] = [];
  visitJson(schema, json, "", violations);
  if (violations.length === 0 && objectsIn(json, MAX_DECODED_MESSAGES + 1) > MAX_DECODED_MESSAGES) {
    violations.push(tooManyMessages());
  }
  return violations;
}

/** The violation of a request holding more than MAX_DECODED_MESSAGES messages. */
export function tooManyMessages(): FieldViolation {
  return { field: "", message: `holds more than ${MAX_DECODED_MESSAGES} messages (objects) in all` };
}

/** JSON objects in `json`, counted up to `limit`. */
function objectsIn(json: JsonValue, limit: number): number {
  let objects = 0;
  const pending: JsonValue[] = [json];
  while (pending.length > 0 && objects < limit) {
    const value = pending.pop();
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) pending.push(item);
    } else {
      objects++;
      for (const key in value) {
        const item = value[key];
        if (typeof item === "object" && item !== null) pending.push(item);
      }
    }
  }
  return objects;
}

/** Checks the caps of a decoded request message (Connect and gRPC). */
export function checkMessageLimits(schema: DescMessage, message: Message): FieldViolation[] {
  const violations: FieldViolation[] = [];
  visitMessage(schema, message, "", violations);
  return violations;
}

/** tooManyItems' message: a batch that is not an array at all is invalid (400), not too large. */
const TOO_MANY_ITEMS = /^holds \d+ items; at most \d+ are allowed$/;

/**
 * Whether the request's body as a whole is a batch of session events (usage, log or metric items) over its cap:
 * the request is then too large (413) rather than malformed.
 */
export function isBatchOverCap(method: DescMethod, violations: readonly FieldViolation[]): boolean {
  const body = getOption(method, http).body;
  const field = method.input.fields.find((candidate) => candidate.name === body);
  const batch = field?.fieldKind === "list" && field.message?.typeName === "provision.v1.SessionEvent";
  return (
    batch &&
    violations.some((violation) => violation.field === field.jsonName && TOO_MANY_ITEMS.test(violation.message))
  );
}

/** The violation a field over its cap is reported with. */
export function tooManyItems(field: string, count: number, cap: number): FieldViolation {
  return { field, message: `holds ${count} items; at most ${cap} are allowed` };
}

/** Every repeated and map field reachable from the request messages of `services`, with its cap (0: none). */
export function requestItemCaps(services: DescService[]): ItemCap[] {
  const caps: ItemCap[] = [];
  const seen = new Set<string>();
  const visit = (message: DescMessage) => {
    if (seen.has(message.typeName) || isWellKnown(message)) return;
    seen.add(message.typeName);
    for (const field of message.fields) {
      if (field.fieldKind === "list" || field.fieldKind === "map") {
        caps.push({ message: message.typeName, field: field.jsonName, maxItems: capOf(field) });
      }
      const element = elementMessage(field);
      if (element) visit(element);
    }
  };
  for (const service of services) for (const method of service.methods) visit(method.input);
  return caps;
}

function visitJson(schema: DescMessage, json: JsonValue, path: string, out: FieldViolation[]): void {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return;
  for (const { field, cap, element } of planOf(schema)) {
    if (out.length >= MAX_REPORTED) return;
    const value = json[field.jsonName] ?? json[field.name];
    if (typeof value !== "object" || value === null) continue;
    const fieldPath = path + field.jsonName;
    if (field.fieldKind === "list" && Array.isArray(value)) {
      if (cap && value.length > cap) out.push(tooManyItems(fieldPath, value.length, cap));
      else if (element)
        for (const [index, item] of value.entries()) visitJson(element, item, `${fieldPath}[${index}].`, out);
    } else if (field.fieldKind === "map" && !Array.isArray(value)) {
      const keys = Object.keys(value);
      if (cap && keys.length > cap) out.push(tooManyItems(fieldPath, keys.length, cap));
      else if (element) for (const key of keys) visitJson(element, value[key], `${fieldPath}${mapKey(key)}.`, out);
    } else if (field.fieldKind === "message" && element) {
      visitJson(element, value, `${fieldPath}.`, out);
    }
  }
}

function visitMessage(schema: DescMessage, message: Message, path: string, out: FieldViolation[]): void {
  for (const { field, cap, element } of planOf(schema)) {
    if (out.length >= MAX_REPORTED) return;
    const value = (message as unknown as Record<string, unknown>)[field.localName];
    if (value === undefined || value === null) continue;
    const fieldPath = path + field.jsonName;
    if (field.fieldKind === "list") {
      const items = value as Message[];
      if (cap && items.length > cap) out.push(tooManyItems(fieldPath, items.length, cap));
      else if (element)
        for (const [index, item] of items.entries()) visitMessage(element, item, `${fieldPath}[${index}].`, out);
    } else if (field.fieldKind === "map") {
      const entries = value as Record<string, Message>;
      const keys = Object.keys(entries);
      if (cap && keys.length > cap) out.push(tooManyItems(fieldPath, keys.length, cap));
      else if (element) for (const key of keys) visitMessage(element, entries[key], `${fieldPath}${mapKey(key)}.`, out);
    } else if (element) {
      visitMessage(element, value as Message, `${fieldPath}.`, out);
    }
  }
}

function planOf(schema: DescMessage): Plan[] {
  let plan = plans.get(schema);
  if (!plan) {
    plan = buildPlan(schema);
    plans.set(schema, plan);
  }
  return plan;
}

function buildPlan(schema: DescMessage): Plan[] {
  const plan: Plan[] = [];
  for (const field of schema.fields) {
    const element = elementMessage(field);
    const nested = element && holdsContainers(element, new Set()) ? element : undefined;
    const container = field.fieldKind === "list" || field.fieldKind === "map";
    if (container || nested) plan.push({ field, cap: capOf(field), element: nested });
  }
  return plan;
}

/** Whether `message` has a repeated or map field anywhere below it (recursive types included once). */
function holdsContainers(message: DescMessage, visiting: Set<DescMessage>): boolean {
  if (visiting.has(message) || isWellKnown(message)) return false;
  visiting.add(message);
  return message.fields.some(
    (field) =>
      field.fieldKind === "list" ||
      field.fieldKind === "map" ||
      (elementMessage(field) !== undefined && holdsContainers(elementMessage(field) as DescMessage, visiting)),
  );
}

export function elementMessage(field: DescField): DescMessage | undefined {
  switch (field.fieldKind) {
    case "message":
      return field.message;
    case "list":
      return field.listKind === "message" ? field.message : undefined;
    case "map":
      return field.mapKind === "message" ? field.message : undefined;
    default:
      return undefined;
  }
}

export function capOf(field: DescField): number {
  return hasOption(field, max_items) ? getOption(field, max_items) : 0;
}

/** google.protobuf types (Timestamp, Duration, Struct...) have their own JSON forms and declare no caps. */
function isWellKnown(message: DescMessage): boolean {
  return message.typeName.startsWith("google.protobuf.");
}

export function mapKey(key: string): string {
  return `[${JSON.stringify(key)}]`;
}
