import { OverageSeverity, OverageSeveritySchema } from "../../gen/provision/v1/catalog_pb.js";
import type { FieldViolation } from "../platform/errors.js";
import { matchesEventType } from "./event-catalog.js";

/** A SubscriptionFilter, as the message or as its stored REST JSON; absent lists and maps do not narrow. */
export interface EventFilter {
  entityKinds?: readonly string[];
  /** OverageSeverity values. */
  severities?: readonly number[];
  attributes?: Readonly<Record<string, string>>;
}

/** What a subscription asks for. */
export interface SubscriptionInterest {
  eventTypes: readonly string[];
  filter?: EventFilter | null;
}

/** What matching reads of an event. */
export interface MatchedEvent {
  type: string;
  entityKind: string;
  /**
   * OverageSeverity of an overage event's new status (a credit balance's mapped Normal -> Normal, Low ->
   * Warning, Depleted -> OverUsage); absent on events that have none.
   */
  severity?: number;
  /** The envelope's attributes by name (`id`, `source`, `subject`, `entityid`, ...) as text. */
  attributes: Readonly<Record<string, string>>;
  /** The event's `data`; its top-level members are the filter's fallback attributes. */
  data: Readonly<Record<string, unknown>>;
}

/** The `entitykind` values a filter may name. */
export const FILTERABLE_ENTITY_KINDS: readonly string[] = ["entitlement", "monitored-asset", "asset-usage-tracker"];
export const MAX_ATTRIBUTE_NAME_LENGTH = 128;
export const MAX_ATTRIBUTE_VALUE_LENGTH = 1024;

const SEVERITIES = OverageSeveritySchema.values
  .map((value) => value.number)
  .filter((number) => number !== OverageSeverity.UNSPECIFIED);

/** Whether a subscription wants the event: one of its event types matches and so does its filter. */
export function matchesSubscription(subscription: SubscriptionInterest, event: MatchedEvent): boolean {
  return matchesEventType(subscription.eventTypes, event.type) && matchesFilter(subscription.filter, event);
}

/**
 * Whether the event passes the filter: every criterion given holds, any value of a list matches, an empty
 * list or map does not narrow, and events without a severity are not narrowed by severities.
 */
export function matchesFilter(filter: EventFilter | null | undefined, event: MatchedEvent): boolean {
  if (!filter) return true;
  const { entityKinds = [], severities = [], attributes = {} } = filter;
  if (entityKinds.length > 0 && !entityKinds.includes(event.entityKind)) return false;
  if (severities.length > 0 && event.severity !== undefined && !severities.includes(event.severity)) return false;
  return Object.entries(attributes).every(([name, value]) => attributeText(event, name) === value);
}

/** Checks a filter's values (the item caps are the proto's max_items, checked before). */
export function checkFilter(filter: EventFilter, field = "filter"): FieldViolation[] {
  const violations: FieldViolation[] = [];
  for (const [index, kind] of (filter.entityKinds ?? []).entries()) {
    if (!FILTERABLE_ENTITY_KINDS.includes(kind)) {
      const message = `must be one of ${FILTERABLE_ENTITY_KINDS.join(", ")}`;
      violations.push({ field: `${field}.entityKinds[${index}]`, message });
    }
  }
  for (const [index, severity] of (filter.severities ?? []).entries()) {
    if (!SEVERITIES.includes(severity)) {
      violations.push({ field: `${field}.severities[${index}]`, message: `must be one of ${SEVERITIES.join(", ")}` });
    }
  }
  for (const [name, value] of Object.entries(filter.attributes ?? {})) {
    const message = attributeProblem(name, value);
    if (message) violations.push({ field: `${field}.attributes[${JSON.stringify(name)}]`, message });
  }
  return violations;
}

/** The envelope attribute of that name, else the top-level data member as text; undefined when neither is. */
function attributeText(event: MatchedEvent, name: string): string | undefined {
  if (Object.hasOwn(event.attributes, name)) return event.attributes[name];
  if (!Object.hasOwn(event.data, name)) return undefined;
  const value = event.data[name];
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    default:
      return undefined;
  }
}

function attributeProblem(name: string, value: string): string | undefined {
  if (name === "") return "must have a name";
  if ([...name].length > MAX_ATTRIBUTE_NAME_LENGTH) {
    return `has a name longer than ${MAX_ATTRIBUTE_NAME_LENGTH} characters`;
  }
  if ([...value].length > MAX_ATTRIBUTE_VALUE_LENGTH) {
    return `must be at most ${MAX_ATTRIBUTE_VALUE_LENGTH} characters`;
  }
  return undefined;
}
