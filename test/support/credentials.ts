import type { Interceptor } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
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

/** `Bearer <token>` for the server's bootstrap client, minted directly with only `scopes`. */
export async function bearerWithScopes(server: Pick<TestServer, "admin" | "app">, scopes: string[]): Promise<string> {
  const token = await server.app.tokens.issue({
    clientId: server.admin.clientId,
    providerId: DEFAULT_PROVIDER_ID,
    scopes,
  });
  return `Bearer ${token}`;
}
