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
): Promise<BootstrapOutcome> {
  return identity.withLock("provision-bootstrap", async () => {
    const configured = config.bootstrapClient;
    if (configured) {
      const existing = await identity.findClient(configured.clientId);
      if (existing) {
        // A new configured secret is a rotation: the tokens issued under the old one are revoked with it.
        const changes = {
          ...((await verifySecret(configured.clientSecret, existing.secretHash))
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
