import type { Clock } from "../platform/clock.js";
import type { AuthConfig } from "../platform/config.js";
import { DEFAULT_PROVIDER_ID } from "../server/tenant.js";
import type { IdentityRepository } from "./identity-repository.js";
import { generateClientSecret, hashSecret, newTokenGeneration, verifySecret } from "./secrets.js";

export const ALL_SCOPES = "*";

export type BootstrapOutcome =
  | { kind: "configured-client"; clientId: string; created: boolean }
  | { kind: "first-client"; clientId: string; clientSecret: string }
  | { kind: "nothing" };

/** The configured bootstrap secret checked against the hash stored at the time (see checkBootstrapSecretEarly). */
export interface SecretCheck {
  hash: string;
  matches: boolean;
}

/**
 * Checks the configured bootstrap secret against its stored hash while the rest of start-up goes on (the scrypt
 * runs on libuv's thread pool); bootstrapIdentity reuses the answer if the hash is still the same. Never fails:
 * with no configured client, no stored one, or no table yet (a first start), there is nothing to reuse.
 */
export async function checkBootstrapSecretEarly(
  identity: IdentityRepository,
  config: AuthConfig,
): Promise<SecretCheck | undefined> {
  const configured = config.bootstrapClient;
  if (!configured) return undefined;
  const existing = await identity.findClient(configured.clientId).catch(() => null);
  if (!existing) return undefined;
  return { hash: existing.secretHash, matches: await verifySecret(configured.clientSecret, existing.secretHash) };
}

/**
 * Makes sure someone can get a token: the configured bootstrap client (all scopes, on the default provider)
 * exists with the configured secret; or, on a database with no client at all, a first client is made and its
 * secret handed back once. Idempotent, and safe when several instances start at once.
 */
export async function bootstrapIdentity(
  identity: IdentityRepository,
  config: AuthConfig,
  clock: Clock,
  newId: () => string,
  earlyCheck?: Promise<SecretCheck | undefined>,
): Promise<BootstrapOutcome> {
  const early = await earlyCheck;
  return identity.withLock("provision-bootstrap", async () => {
    const configured = config.bootstrapClient;
    if (configured) {
      const existing = await identity.findClient(configured.clientId);
      if (existing) {
        const unchanged =
          early?.hash === existing.secretHash
            ? early.matches
            : await verifySecret(configured.clientSecret, existing.secretHash);
        // A new configured secret is a rotation: the tokens issued under the old one are revoked with it.
        const changes = {
          ...(unchanged
            ? {}
            : { secretHash: await hashSecret(configured.clientSecret), tokenGeneration: newTokenGeneration() }),
          ...(existing.scopes === ALL_SCOPES ? {} : { scopes: ALL_SCOPES }),
          ...(existing.disabled ? { disabled: false } : {}),
        };
        if (Object.keys(changes).length > 0) await identity.updateClient(existing.clientId, changes);
        return { kind: "configured-client", clientId: configured.clientId, created: false };
      }
      await identity.insertClient({
        clientId: configured.clientId,
        providerId: DEFAULT_PROVIDER_ID,
        name: "bootstrap",
        scopes: ALL_SCOPES,
        secretHash: await hashSecret(configured.clientSecret),
        disabled: false,
        tokenGeneration: newTokenGeneration(),
        createdAt: clock.now(),
        lastUsedAt: null,
      });
      return { kind: "configured-client", clientId: configured.clientId, created: true };
    }
    if ((await identity.countClients()) > 0) return { kind: "nothing" };
    const clientSecret = generateClientSecret();
    const clientId = newId();
    await identity.insertClient({
      clientId,
      providerId: DEFAULT_PROVIDER_ID,
      name: "first client",
      scopes: ALL_SCOPES,
      secretHash: await hashSecret(clientSecret),
      disabled: false,
      tokenGeneration: newTokenGeneration(),
      createdAt: clock.now(),
      lastUsedAt: null,
    });
    return { kind: "first-client", clientId, clientSecret };
  });
}
