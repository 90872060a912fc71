import { createHmac, timingSafeEqual } from "node:crypto";

/** How `webhook-timestamp` is written: RFC 3339 UTC (the spec's default) or Unix seconds (Standard Webhooks). */
export type TimestampFormat = "rfc3339" | "unix";

const VERSION_PREFIX = "v1,";

/** The `webhook-timestamp` text: `2026-03-01T12:00:00Z` (whole seconds, UTC) or `1772366400`. */
export function webhookTimestamp(date: Date, format: TimestampFormat): string {
  const seconds = Math.floor(date.getTime() / 1000);
  if (format === "unix") return String(seconds);
  return `${new Date(seconds * 1000).toISOString().slice(0, 19)}Z`;
}

/** base64 of HMAC-SHA256(key, `{id}.{timestamp}.{body}`), over the body's exact bytes. */
export function signature(key: Buffer, id: string, timestamp: string, body: Buffer): string {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64");
}

/** The `webhook-signature` value: one `v1,<base64>` entry per key (current first), space-separated. */
export function signatureHeader(keys: Buffer[], id: string, timestamp: string, body: Buffer): string {
  return keys.map((key) => VERSION_PREFIX + signature(key, id, timestamp, body)).join(" ");
}

/** True when some `v1` entry of `header` is the signature with some key; compared in constant time. */
export function verifySignatureHeader(
  header: string,
  keys: Buffer[],
  id: string,
  timestamp: string,
  body: Buffer,
): boolean {
  const expected = keys.map((key) => Buffer.from(signature(key, id, timestamp, body)));
  const offered = header
    .split(" ")
    .filter((entry) => entry.startsWith(VERSION_PREFIX))
    .map((entry) => Buffer.from(entry.slice(VERSION_PREFIX.length)));
  return offered.some((candidate) => expected.some((wanted) => sameBytes(candidate, wanted)));
}

function sameBytes(candidate: Buffer, wanted: Buffer): boolean {
  return candidate.length === wanted.length && timingSafeEqual(candidate, wanted);
}
