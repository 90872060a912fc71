import { type Duration, durationMs as protoDurationMs, type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { dateUpToLatest } from "../platform/timestamps.js";

// Time conventions of every licensing rule: a start instant is inclusive (valid from it on) and an end
// instant is exclusive (over from it on, like a JWT `exp`).

/**
 * A policy's google.protobuf.Duration in milliseconds (nanos rounded). Null when unset, and also when zero or
 * negative: such a span counts as unset in every policy.
 */
export function durationMs(duration: Duration | undefined): number | null {
  if (duration === undefined) return null;
  const ms = protoDurationMs(duration);
  return ms > 0 ? ms : null;
}

export function dateOf(timestamp: Timestamp | undefined): Date | null {
  return timestamp === undefined ? null : timestampDate(timestamp);
}

/** `date` + `ms`, held at the latest instant the databases store (a policy's span may reach past it). */
export function addMs(date: Date, ms: number): Date {
  return dateUpToLatest(date.getTime() + ms);
}

/** The earliest of the instants given, nulls ignored; null when there is none. */
export function earliest(...dates: (Date | null | undefined)[]): Date | null {
  let first: Date | null = null;
  for (const date of dates) {
    if (date && (first === null || date.getTime() < first.getTime())) first = date;
  }
  return first;
}

/** True from `end` on; never for a null end. */
export function hasEnded(end: Date | null, now: Date): boolean {
  return end !== null && now.getTime() >= end.getTime();
}

/** True before `start`; never for a null start. */
export function notYetStarted(start: Date | null, now: Date): boolean {
  return start !== null && now.getTime() < start.getTime();
}
