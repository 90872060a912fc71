import { randomBytes, randomUUID } from "node:crypto";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { hashSecret, newTokenGeneration } from "../../src/auth/secrets.js";
import type { TestServer } from "./test-server.js";

export interface ProviderClient {
  providerId: string;
  clientId: string;
  clientSecret: string;
}

/** A new provider with one client (`scopes` space-separated), written straight to the server's database. */
export async function createProviderWithClient(server: TestServer, scopes = "*"): Promise<ProviderClient> {
  const identity = new IdentityRepository(server.app.dataSource);
  const providerId = randomUUID();
  const suffix = randomBytes(4).toString("hex");
  await identity.insertProvider({ id: providerId, name: `Provider ${suffix}`, createdAt: new Date() });
  const clientId = `tenant-${suffix}`;
  const clientSecret = randomBytes(32).toString("base64url");
  await identity.insertClient({
    clientId,
    providerId,
    name: `admin of ${suffix}`,
    scopes,
    secretHash: await hashSecret(clientSecret),
    disabled: false,
    tokenGeneration: newTokenGeneration(),
    createdAt: new Date(),
    lastUsedAt: null,
  });
  return { providerId, clientId, clientSecret };
}
