import { randomBytes } from "node:crypto";

export const WEBHOOK_SECRET_PREFIX = "whsec_";
/** A vendor-chosen secret holds 24 to 64 bytes; a generated one 32. */
export const WEBHOOK_SECRET_MIN_BYTES = 24;
export const WEBHOOK_SECRET_MAX_BYTES = 64;
const GENERATED_SECRET_BYTES = 32;

const STANDARD_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A new signing secret: `whsec_` + standard base64 of 32 random bytes (44 characters). */
export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(GENERATED_SECRET_BYTES).toString("base64");
}

/** Why `secret` cannot be a signing secret (a message to follow the field name), or null when it can. */
export function webhookSecretProblem(secret: string): string | null {
  const parsed = parseSecret(secret);
  return typeof parsed === "string" ? parsed : null;
}

/** The HMAC key of a valid secret: the decoded bytes after `whsec_`, never the text. Throws for an invalid one. */
export function webhookSecretKey(secret: string): Buffer {
  const parsed = parseSecret(secret);
  if (typeof parsed === "string") throw new Error(`webhook secret ${parsed}`);
  return parsed;
}

/** The key bytes, or why there are none. */
function parseSecret(secret: string): Buffer | string {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) return `must start with "${WEBHOOK_SECRET_PREFIX}"`;
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  const key = Buffer.from(encoded, "base64");
  // Node decodes leniently (junk skipped, URL-safe letters read, padding optional): only the canonical text passes.
  if (!STANDARD_BASE64.test(encoded) || key.toString("base64") !== encoded) {
    return `must be "${WEBHOOK_SECRET_PREFIX}" followed by standard base64 (A-Z, a-z, 0-9, "+" and "/", padded with "=")`;
  }
  if (key.length < WEBHOOK_SECRET_MIN_BYTES || key.length > WEBHOOK_SECRET_MAX_BYTES) {
    return `must encode ${WEBHOOK_SECRET_MIN_BYTES} to ${WEBHOOK_SECRET_MAX_BYTES} bytes after "${WEBHOOK_SECRET_PREFIX}", not ${key.length}`;
  }
  return key;
}
