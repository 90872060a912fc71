import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { ConfigError } from "../platform/config.js";

const SEALED = "aes256gcm:";
const PLAIN = "plain:";
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Private key material as stored: AES-256-GCM sealed when a key-encryption key is configured. */
export function sealPrivateKey(json: string, keyEncryptionKey: Buffer | undefined): string {
  if (!keyEncryptionKey) return PLAIN + json;
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", keyEncryptionKey, iv, { authTagLength: TAG_BYTES });
  const sealed = Buffer.concat([cipher.update(json, "utf8"), cipher.final()]);
  return SEALED + [iv, cipher.getAuthTag(), sealed].map((part) => part.toString("base64")).join(".");
}

/** Whether a stored private key is sealed with a key-encryption key. */
export function isSealed(stored: string): boolean {
  return stored.startsWith(SEALED);
}

export function unsealPrivateKey(stored: string, keyEncryptionKey: Buffer | undefined): string {
  if (stored.startsWith(PLAIN)) return stored.slice(PLAIN.length);
  if (!stored.startsWith(SEALED)) throw new Error("a signing key is stored in an unknown format");
  if (!keyEncryptionKey) {
    throw new ConfigError("PROVISION_KEY_ENCRYPTION_KEY", "must be set: the stored signing keys are sealed with it");
  }
  try {
    const [iv, tag, sealed, extra] = stored
      .slice(SEALED.length)
      .split(".")
      .map((part) => Buffer.from(part, "base64"));
    if (extra || iv?.length !== IV_BYTES || tag?.length !== TAG_BYTES || !sealed) throw new Error("malformed");
    const decipher = createDecipheriv("aes-256-gcm", keyEncryptionKey, iv, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed), decipher.final()]).toString("utf8");
  } catch {
    throw new ConfigError(
      "PROVISION_KEY_ENCRYPTION_KEY",
      "does not open the stored signing keys (wrong key or damaged data)",
    );
  }
}
