import type { Interceptor } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import type { App } from "../../src/app.js";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import type { TestServer } from "./test-server.js";

/** A Connect interceptor sending `authorization` (e.g. `Bearer …`) on every call of a transport. */
export function sendAuthorization(authorization: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", authorization);
    return next(request);
  };
}

/** grpc-js call metadata carrying `authorization`. */
export function authorizationMetadata(authorization: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", authorization);
  return metadata;
}

/** The current token generation of a client (`gen` of its tokens); `none` when there is no such client. */
export async function tokenGenerationOf(app: Pick<App, "dataSource">, clientId: string): Promise<string> {
  return (await new IdentityRepository(app.dataSource).findClient(clientId))?.tokenGeneration ?? "none";
}

/** An access token minted directly by `app` for a client, with the client's current token generation. */
export async function mintAccessToken(
  app: Pick<App, "dataSource" | "tokens">,
  clientId: string,
  scopes: string[],
  providerId = DEFAULT_PROVIDER_ID,
): Promise<string> {
  return app.tokens.issue({ clientId, providerId, scopes, generation: await tokenGenerationOf(app, clientId) });
}

/** `Bearer <token>` for the server's bootstrap client, minted directly with only `scopes`. */
export async function bearerWithScopes(server: Pick<TestServer, "admin" | "app">, scopes: string[]): Promise<string> {
  return `Bearer ${await mintAccessToken(server.app, server.admin.clientId, scopes)}`;
}
