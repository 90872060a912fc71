import type { SessionEvent } from "../../gen/provision/v1/session_event_pb.js";
import type { SessionOfCall } from "../licensing/live-session.js";
import { storableDate } from "../platform/timestamps.js";
import { Violations } from "../platform/validation.js";
import type { NewSessionRecord } from "./session-record-store.js";

/** How far ahead of the server's clock a client's creationDateTime may be (clock skew). */
export const MAX_FUTURE_MS = 5 * 60_000;
/** Invalid fields one answer names at most (a batch holds up to 1,000 items). */
const MAX_VIOLATIONS = 20;

/** What one kind of session record (logs, metrics) accepts as eventName and eventData. */
export interface SessionRecordKind {
  /** The stored eventName, or a message saying why `name` is refused. */
  eventName(name: string): { name: string } | { refused: string };
  /** eventData's limit, in bytes of UTF-8. */
  maxDataBytes: number;
  /** Why `data` is refused; undefined when it is accepted. */
  refuseData(data: string): string | undefined;
}

/**
 * The rows of a batch of items, every item checked first: one invalid item refuses the whole batch (400 naming
 * `events[i].<field>`), and nothing of it is stored.
 */
export function recordsOfEvents(
  kind: SessionRecordKind,
  events: SessionEvent[],
  session: SessionOfCall,
  now: Date,
): NewSessionRecord[] {
  const violations = new Violations();
  const records: NewSessionRecord[] = [];
  for (const [index, event] of events.entries()) {
    const record = recordOfEvent(kind, event, session, now, (field, message) =>
      violations.add(`events[${index}].${field}`, message),
    );
    if (record) records.push(record);
    if (violations.list.length >= MAX_VIOLATIONS) break;
  }
  violations.throwIfAny();
  return records;
}

function recordOfEvent(
  kind: SessionRecordKind,
  event: SessionEvent,
  session: SessionOfCall,
  now: Date,
  refuse: (field: string, message: string) => void,
): NewSessionRecord | undefined {
  let valid = true;
  const invalid = (field: string, message: string) => {
    refuse(field, message);
    valid = false;
  };
  if (event.transactionId < 0n) invalid("transactionId", "must be 0 (none) or positive");
  if (event.sessionId !== "" && event.sessionId.toLowerCase() !== session.sessionId) {
    invalid("sessionId", "must be empty or the session in the path");
  }
  if (event.apiVersion !== 0 && event.apiVersion !== 1) invalid("apiVersion", "must be 0 or 1");
  const occurredAt = event.creationDateTime ? storableDate(event.creationDateTime) : now;
  if (!occurredAt) {
    invalid("creationDateTime", "must be an instant between 1970 and 9999");
  } else if (occurredAt.getTime() > now.getTime() + MAX_FUTURE_MS) {
    invalid("creationDateTime", "is more than 5 minutes ahead of the server's clock");
  }
  const name = kind.eventName(event.eventName);
  if ("refused" in name) invalid("eventName", name.refused);
  const dataRefusal =
    Buffer.byteLength(event.eventData, "utf8") > kind.maxDataBytes
      ? `must be at most ${kind.maxDataBytes} bytes of UTF-8`
      : kind.refuseData(event.eventData);
  if (dataRefusal) invalid("eventData", dataRefusal);
  if (!valid || "refused" in name || !occurredAt) return undefined;
  return {
    providerId: session.providerId,
    entitlementId: session.entitlementId,
    sessionId: session.sessionId,
    transactionId: event.transactionId === 0n ? null : event.transactionId.toString(),
    eventName: name.name,
    eventData: event.eventData,
    occurredAt,
    recordedAt: now,
  };
}
