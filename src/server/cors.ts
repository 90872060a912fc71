import type { AllowedOrigins } from "../platform/allowed-origins.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

const METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE";
/** What a browser script may read of an answer besides the simple headers. */
const EXPOSED = "X-Request-Id, WWW-Authenticate, Retry-After, grpc-status, grpc-message, grpc-status-details-bin";
const PREFLIGHT_CACHE_SECONDS = "7200";
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

/**
 * Cross-origin requests from browsers (CORS_ALLOWED_ORIGINS): an allowed origin's preflight is answered 204 here,
 * allowing every method and the headers it asks for (calls carry bearer tokens, never cookies, so the credential,
 * not the origin, is what each call is checked by); its other requests get the headers that let the script read the
 * answer. Answers true when it answered the request. Another origin's requests go on as if it had not been named.
 */
export function answerCors(allowed: AllowedOrigins, request: NodeRequest, response: NodeResponse): boolean {
  // Answers differ by origin unless every origin is allowed: a shared cache must keep them apart.
  if (allowed !== "*") response.setHeader("Vary", "Origin");
  const origin = request.headers.origin;
  if (origin === undefined || !(allowed === "*" || allowed.has(origin))) return false;
  response.setHeader("Access-Control-Allow-Origin", allowed === "*" ? "*" : origin);
  const asked = request.headers["access-control-request-method"];
  if (request.method !== "OPTIONS" || asked === undefined) {
    response.setHeader("Access-Control-Expose-Headers", EXPOSED);
    return false;
  }
  response.setHeader("Access-Control-Allow-Methods", METHODS);
  const headers = request.headers["access-control-request-headers"];
  if (headers !== undefined && HEADER_LIST.test(headers)) response.setHeader("Access-Control-Allow-Headers", headers);
  response.setHeader("Access-Control-Max-Age", PREFLIGHT_CACHE_SECONDS);
  response.statusCode = 204;
  response.end();
  return true;
}
