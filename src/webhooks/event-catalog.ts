import { type DescMessage, getOption, hasOption } from "@bufbuild/protobuf";
import { event, file_provision_v1_webhook_events } from "../../gen/provision/v1/webhook_events_pb.js";
import type { FieldViolation } from "../platform/errors.js";

/** One event type of the catalog: what its envelope says and, once an issue emits it, its `data` message. */
export interface EventCatalogEntry {
  /** The envelope `type`. */
  type: string;
  /** The envelope `entitykind`. */
  entityKind: string;
  /** The envelope `eventversion`. */
  eventVersion: number;
  /** When the event fires. */
  description: string;
  /** The message its `data` is written from (webhook_events.proto); undefined while nothing emits the type. */
  dataSchema?: DescMessage;
}

/** Sent only to the subscription it verifies: never matched, and no subscription may name it. */
export const CHALLENGE_EVENT_TYPE = "Webhooks.Registration.Challenge";

/** Most entries `eventTypes` may hold (the proto's max_items). */
export const MAX_EVENT_TYPE_PATTERNS = 100;

/** Files whose messages declare event data with the `event` option. */
const EVENT_FILES = [file_provision_v1_webhook_events];

/**
 * The spec's catalog types that no data message declares yet; subscriptions may already name them. A message
 * declared later for one of them replaces its entry here.
 */
const UNDECLARED_TYPES: readonly EventCatalogEntry[] = [
  undeclared("MeteredUsage.OverageStatusChanged", "monitored-asset", "a monitored asset crosses a quota tier"),
  undeclared("CreditBalance.StatusChanged", "monitored-asset", "a prepaid credit balance crosses a threshold"),
  undeclared("DataSubjectRequest.Filed", "data-subject-request", "a data-subject request is filed"),
  undeclared("DataSubjectRequest.Approved", "data-subject-request", "a data-subject request is approved"),
  undeclared("DataSubjectRequest.Rejected", "data-subject-request", "a data-subject request is rejected"),
  undeclared("DataSubjectRequest.Completed", "data-subject-request", "a data-subject request is completed"),
  undeclared("User.Erased", "user", "a user is erased"),
];

/** Every event type of the catalog, ordered by type. */
export const EVENT_CATALOG: readonly EventCatalogEntry[] = catalogOf(declaredTypes(), UNDECLARED_TYPES);

const entriesByType = new Map(EVENT_CATALOG.map((entry) => [entry.type, entry]));
const subscribableTypes = EVENT_CATALOG.map((entry) => entry.type).filter((type) => type !== CHALLENGE_EVENT_TYPE);

/** The catalog entry of a type, or undefined for a type the service does not know. */
export function findEventType(type: string): EventCatalogEntry | undefined {
  return entriesByType.get(type);
}

/**
 * Checks a subscription's `eventTypes`: at least one, at most 100, each an exact known type, `Prefix.*` for a
 * dotted prefix of a known type, or `*`. Duplicates are allowed (see distinctEventTypePatterns).
 */
export function checkEventTypePatterns(patterns: readonly string[], field = "eventTypes"): FieldViolation[] {
  if (patterns.length === 0) return [{ field, message: "must name at least one event type, prefix wildcard or *" }];
  if (patterns.length > MAX_EVENT_TYPE_PATTERNS) {
    const message = `holds ${patterns.length} items; at most ${MAX_EVENT_TYPE_PATTERNS} are allowed`;
    return [{ field, message }];
  }
  const violations: FieldViolation[] = [];
  for (const [index, pattern] of patterns.entries()) {
    const message = patternProblem(pattern);
    if (message) violations.push({ field: `${field}[${index}]`, message });
  }
  return violations;
}

/** The patterns without repeats, in their first order. */
export function distinctEventTypePatterns(patterns: readonly string[]): string[] {
  return [...new Set(patterns)];
}

/** Whether an event of this type matches any of the patterns; the challenge never does. */
export function matchesEventType(patterns: readonly string[], type: string): boolean {
  if (type === CHALLENGE_EVENT_TYPE) return false;
  return patterns.some((pattern) => patternMatches(pattern, type));
}

function patternMatches(pattern: string, type: string): boolean {
  if (pattern === "*") return true;
  if (pattern.endsWith(".*")) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

function patternProblem(pattern: string): string | undefined {
  if (pattern === "") return "must not be empty";
  if (pattern === CHALLENGE_EVENT_TYPE) return "cannot be subscribed to: it goes only to the subscription it verifies";
  if (pattern === "*" || entriesByType.has(pattern)) return undefined;
  const prefix = pattern.endsWith(".*") ? pattern.slice(0, -2) : "";
  if (prefix !== "" && !prefix.includes("*")) {
    if (subscribableTypes.some((type) => patternMatches(pattern, type))) return undefined;
    return "matches no event type: the part before .* must be a dotted prefix of a type that can be subscribed to";
  }
  const sameButCase = subscribableTypes.find((type) => type.toLowerCase() === pattern.toLowerCase());
  if (sameButCase) return `is not a known event type; types are case-sensitive: ${sameButCase}`;
  return "is not a known event type; give an exact type (Entitlement.Activated), a prefix wildcard (Entitlement.*) or *";
}

function declaredTypes(): EventCatalogEntry[] {
  const messages = EVENT_FILES.flatMap((file) => file.messages).filter((message) => hasOption(message, event));
  return messages.map((message) => {
    const declaration = getOption(message, event);
    return {
      type: declaration.type,
      entityKind: declaration.entitykind,
      eventVersion: declaration.eventversion,
      description: declaration.description,
      dataSchema: message,
    };
  });
}

function catalogOf(declared: EventCatalogEntry[], undeclaredEntries: readonly EventCatalogEntry[]) {
  const byType = new Map(undeclaredEntries.map((entry) => [entry.type, entry]));
  for (const entry of declared) byType.set(entry.type, entry);
  return [...byType.values()].sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

function undeclared(type: string, entityKind: string, description: string): EventCatalogEntry {
  return { type, entityKind, eventVersion: 1, description };
}
