import { READ_METHODS, refusedMethod, writeJson } from "../server/http-responses.js";
import type { NodeRequest, NodeResponse } from "../server/rest/rest-handler.js";
import { JWKS_MAX_AGE_SECONDS, type KeyStore, TOKEN_ALGORITHM } from "./key-store.js";
import { SCOPE_AREAS, SCOPE_VERBS } from "./scopes.js";
import { TOKEN_PATH } from "./token-endpoint.js";

export const DISCOVERY_PATH = "/.well-known/openid-configuration";
/** RFC 8414's path for the same metadata, where OAuth 2.0 clients that are not OpenID clients look. */
export const OAUTH_METADATA_PATH = "/.well-known/oauth-authorization-server";
export const JWKS_PATH = "/.well-known/jwks.json";

/** OAuth 2.0 authorization server metadata, served at the OpenID Connect discovery path. */
export function discoveryDocument(issuer: string) {
  return {
    issuer,
    token_endpoint: issuer + TOKEN_PATH,
    jwks_uri: issuer + JWKS_PATH,
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    response_types_supported: ["token"],
    scopes_supported: SCOPE_AREAS.flatMap((area) => SCOPE_VERBS.map((verb) => `${area}:${verb}`)),
    access_token_signing_alg_values_supported: [TOKEN_ALGORITHM],
  };
}

export function createDiscoveryEndpoints(issuer: string, keys: KeyStore) {
  const document = discoveryDocument(issuer);
  const metadataAt = (path: string) => async (request: NodeRequest, response: NodeResponse) => {
    if (refusedMethod(request, response, path, READ_METHODS)) return;
    response.setHeader("Cache-Control", "public, max-age=3600");
    writeJson(response, 200, document);
  };
  return {
    [DISCOVERY_PATH]: metadataAt(DISCOVERY_PATH),
    [OAUTH_METADATA_PATH]: metadataAt(OAUTH_METADATA_PATH),
    [JWKS_PATH]: async (request: NodeRequest, response: NodeResponse) => {
      if (refusedMethod(request, response, JWKS_PATH, READ_METHODS)) return;
      // Kept shorter than a new key's publication ahead of signing (see PUBLISH_BEFORE_SIGNING_MS).
      response.setHeader("Cache-Control", `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
      writeJson(response, 200, (await keys.jwks()) as never);
    },
  };
}
