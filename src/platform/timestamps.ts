import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { invalidField } from "./errors.js";

/** The latest instant the databases store (MySQL DATETIME ends with the year 9999). */
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** `ms` since the epoch as a Date, held at LATEST_MS: an end worked out from a long span is stored, not refused. */
export function dateUpToLatest(ms: number): Date {
  return new Date(Number.isNaN(ms) ? LATEST_MS : Math.min(ms, LATEST_MS));
}

/**
 * A request's Timestamp as a Date, or undefined when it lies outside 1970–9999 (binary Connect and gRPC carry
 * any seconds; a Date past ±8.64 × 10^15 ms is invalid, and the databases store neither end).
 */
export function storableDate(timestamp: Timestamp): Date | undefined {
  const date = timestampDate(timestamp);
  const ms = date.getTime();
  return Number.isFinite(ms) && ms >= 0 && ms <= LATEST_MS ? date : undefined;
}

/** A request field's Timestamp as a Date; 400 naming the field when it cannot be stored or compared. */
export function requireStorableDate(field: string, timestamp: Timestamp): Date {
  const date = storableDate(timestamp);
  if (!date) throw invalidField(field, "must be an instant between 1970 and 9999");
  return date;
}

/**
 * The Timestamp of a Date, built as the literal message `timestampFromDate` creates: `create` walks the schema on
 * every call, which a path answered thousands of times a second (check-in) notices.
 */
export function timestampLiteral(date: Date): Timestamp {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Timestamp", seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1_000_000 };
}
