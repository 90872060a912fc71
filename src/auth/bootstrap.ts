import type { Clock } from "../platform/clock.js";
import type { AuthConfig } from "../platform/config.js";
import { DEFAULT_PROVIDER_ID } from "../server/tenant.js";
import type { IdentityRepository } from "./identity-repository.js";
import { generateClientSecret, hashSecret, newTokenGeneration, verifySecret } from "./secrets.js";

export const ALL_SCOPES = "*";

export type BootstrapOutcome =
  /** `disabled`: an operator disabled the client, and it stays so until enabled (see the CLI). */
  | { kind: "configured-client"; clientId: string; created: boolean; disabled?: true }
  | { kind: "first-client"; clientId: string; clientSecret: string }
  | { kind: "nothing" };

/**
 * The scrypt work of bootstrapIdentity done ahead (see prepareBootstrap): the configured secret checked against
 * the hash stored at the time, or a secret hashed for a client still to be made (the configured one, or a first).
 */
export type BootstrapPreparation =
  | { kind: "checked"; storedHash: string; matches: boolean }
  | { kind: "hashed"; secret: string; hash: string };

/**
 * Starts bootstrapIdentity's scrypt while the rest of start-up goes on (migrations, keys, services): it runs on
 * libuv's thread pool. bootstrapIdentity uses the answer only where it still holds (the same stored hash, the
 * same secret). Never fails: what cannot be read yet (no table on a first start) is left to bootstrapIdentity.
 */
export async function prepareBootstrap(
  identity: IdentityRepository,
  config: AuthConfig,
): Promise<BootstrapPreparation | undefined> {
  const configured = config.bootstrapClient;
  try {
    if (configured) {
      const existing = await identity.findClient(configured.clientId).catch(() => null);
      if (!existing) return hashAhead(configured.clientSecret);
      const matches = await verifySecret(configured.clientSecret, existing.secretHash);
      return { kind: "checked", storedHash: existing.secretHash, matches };
    }
    const clients = await identity.countClients().catch(() => 0);
    return clients === 0 ? await hashAhead(generateClientSecret()) : undefined;
  } catch {
    return undefined;
  }
}

async function hashAhead(secret: string): Promise<BootstrapPreparation> {
  return { kind: "hashed", secret, hash: await hashSecret(secret) };
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
  preparing?: Promise<BootstrapPreparation | undefined>,
): Promise<BootstrapOutcome> {
  const prepared = await preparing;
  const hashed = async (secret: string) =>
    prepared?.kind === "hashed" && prepared.secret === secret ? prepared.hash : hashSecret(secret);
  return identity.withLock("provision-bootstrap", async () => {
    const configured = config.bootstrapClient;
    if (configured) {
      const existing = await identity.findClient(configured.clientId);
      if (existing) {
        const unchanged =
          prepared?.kind === "checked" && prepared.storedHash === existing.secretHash
            ? prepared.matches
            : await verifySecret(configured.clientSecret, existing.secretHash);
        // A new configured secret is a rotation: the tokens issued under the old one are revoked with it.
        const changes = {
          ...(unchanged
            ? {}
            : { secretHash: await hashed(configured.clientSecret), tokenGeneration: newTokenGeneration() }),
          ...(existing.scopes === ALL_SCOPES ? {} : { scopes: ALL_SCOPES }),
        };
        if (Object.keys(changes).length > 0) await identity.updateClient(existing.clientId, changes);
        const outcome = { kind: "configured-client", clientId: configured.clientId, created: false } as const;
        // Disabling is an operator's decision (a leaked secret, say): a restart with the same variables keeps it.
        return existing.disabled ? { ...outcome, disabled: true } : outcome;
      }
      await identity.insertClient({
        clientId: configured.clientId,
        providerId: DEFAULT_PROVIDER_ID,
        name: "bootstrap",
        scopes: ALL_SCOPES,
        secretHash: await hashed(configured.clientSecret),
        disabled: false,
        tokenGeneration: newTokenGeneration(),
        createdAt: clock.now(),
        lastUsedAt: null,
      });
      return { kind: "configured-client", clientId: configured.clientId, created: true };
    }
    if ((await identity.countClients()) > 0) return { kind: "nothing" };
    const clientSecret = prepared?.kind === "hashed" ? prepared.secret : generateClientSecret();
    const clientId = newId();
    await identity.insertClient({
      clientId,
      providerId: DEFAULT_PROVIDER_ID,
      name: "first client",
      scopes: ALL_SCOPES,
      secretHash: await hashed(clientSecret),
      disabled: false,
      tokenGeneration: newTokenGeneration(),
      createdAt: clock.now(),
      lastUsedAt: null,
    });
    return { kind: "first-client", clientId, clientSecret };
  });
}
