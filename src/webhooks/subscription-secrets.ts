import { sealPrivateKey, unsealPrivateKey } from "../auth/key-sealing.js";
import type { WebhookSubscriptionRow } from "./entities.js";
import { webhookSecretKey } from "./webhook-secrets.js";

/** A `whsec_` secret as stored: sealed with the key-encryption key when one is configured. */
export function sealSecret(secret: string, keyEncryptionKey: Buffer | undefined): string {
  return sealPrivateKey(secret, keyEncryptionKey);
}

/** The HMAC keys a delivery is signed with: the current secret's, then the previous one's during its overlap. */
export function signingKeys(
  subscription: Pick<WebhookSubscriptionRow, "secret" | "previousSecret" | "previousSecretExpiresAt">,
  now: Date,
  keyEncryptionKey: Buffer | undefined,
): Buffer[] {
  const keys = [webhookSecretKey(unsealPrivateKey(subscription.secret, keyEncryptionKey))];
  const overlapping = subscription.previousSecretExpiresAt && subscription.previousSecretExpiresAt > now;
  if (subscription.previousSecret && overlapping) {
    keys.push(webhookSecretKey(unsealPrivateKey(subscription.previousSecret, keyEncryptionKey)));
  }
  return keys;
}
