import { parse as parseContentType } from "content-type";
import getRawBody from "raw-body";
import { countAttempt, limitRequest, RateLimited, retryAfterSeconds } from "../platform/attempt-limits.js";
import type { Clock } from "../platform/clock.js";
import type { Coordinator } from "../platform/coordinator.js";
import { FairTurns } from "../platform/fair-turns.js";
import type { Logger } from "../platform/logger.js";
import { warnThrottled } from "../platform/throttled-warnings.js";
import { addressBucket, clientAddressOf } from "../server/client-address.js";
import { writeJson, writeProblem } from "../server/http-responses.js";
import type { NodeRequest, NodeResponse } from "../server/rest/rest-handler.js";
import { contentEncodingOf } from "../server/rest/rest-input.js";
import { discardUnreadBody } from "../server/unread-body.js";
import type { AccessTokens } from "./access-tokens.js";
import type { IdentityRepository } from "./identity-repository.js";
import { SigningKeyUnavailable } from "./key-store.js";
import { anyCovers, isValidScope, parseScopeList } from "./scopes.js";
import { DECOY_HASH, verifySecret } from "./secrets.js";

export const TOKEN_PATH = "/auth/connect/token";
const FORM_TYPE = "application/x-www-form-urlencoded";
const FORM_LIMIT_BYTES = 16 * 1024;
/** Longer ids are refused before they reach the database or a rate-limit key; ours are far shorter. */
const CLIENT_ID_MAX_LENGTH = 256;
const RATE_WINDOW_SECONDS = 60;

export interface TokenEndpointOptions {
  repository: IdentityRepository;
  tokens: AccessTokens;
  coordinator: Coordinator;
  clock: Clock;
  logger: Logger;
  /** Failed authentications allowed per client id from one address, and requests per address, each minute. */
  limits: { perClient: number; perAddress: number };
}

type OAuthError = "invalid_request" | "invalid_client" | "unsupported_grant_type" | "invalid_scope";

class TokenError extends Error {
  constructor(
    readonly error: OAuthError,
    description: string,
  ) {
    super(description);
  }
}

/**
 * Secret checks (scrypt, on libuv's pool of 4 threads) under way at once: the rest wait their turn, taken by
 * source address in rotation, so that one address's burst of wrong secrets (within its rate limit) delays
 * another address's token by one check, not by the whole burst; and the pool keeps threads for other work.
 */
const SECRET_CHECKS_AT_ONCE = 2;

/** The OAuth 2.0 token endpoint (RFC 6749 §4.4): client credentials for a short-lived access token. */
export function createTokenEndpoint(options: TokenEndpointOptions) {
  const secretChecks = new FairTurns(SECRET_CHECKS_AT_ONCE);
  const limiters = {
    perAddress: options.coordinator.rateLimiter({
      name: "token:address",
      points: options.limits.perAddress,
      durationSeconds: RATE_WINDOW_SECONDS,
    }),
    perClient: options.coordinator.rateLimiter({
      name: "token:attempts",
      points: options.limits.perClient,
      durationSeconds: RATE_WINDOW_SECONDS,
    }),
  };
  return async function handleTokenRequest(request: NodeRequest, response: NodeResponse): Promise<void> {
    response.setHeader("Cache-Control", "no-store");
    response.setHeader("Pragma", "no-cache");
    if (request.method !== "POST") {
      discardUnreadBody(request, response);
      response.setHeader("Allow", "POST");
      writeJson(response, 405, { error: "invalid_request", error_description: "use POST" });
      return;
    }
    try {
      const address = addressBucket(clientAddressOf(request));
      const warn = (error: unknown) => warnUnavailable(options, error);
      await limitRequest(limiters.perAddress, address, warn);
      const form = await readForm(request);
      const credentials = clientCredentials(request, form);
      const grantType = form.get("grant_type");
      if (!grantType) throw new TokenError("invalid_request", "grant_type is required");
      if (grantType !== "client_credentials") {
        throw new TokenError("unsupported_grant_type", "only grant_type=client_credentials is supported");
      }
      const found = await options.repository.findClient(credentials.clientId);
      // Counted under the id as stored: where the database compares ids loosely (trailing spaces on a PAD SPACE
      // collation), `admin ` must not get counters of its own while reaching the secret of `admin`.
      const attempt = await countAttempt(
        limiters.perClient,
        `${found?.clientId ?? credentials.clientId}:${address}`,
        warn,
      );
      const secretMatches = await secretChecks.run(address, () =>
        verifySecret(credentials.clientSecret, found?.secretHash ?? DECOY_HASH),
      );
      const client =
        found && found.clientId === credentials.clientId && secretMatches && !found.disabled ? found : undefined;
      if (!client) throw new TokenError("invalid_client", "client authentication failed");
      await attempt.succeeded();
      const granted = parseScopeList(client.scopes);
      const requested = form.has("scope") ? parseScopeList(form.get("scope") ?? "") : granted;
      const refused = requested.filter((scope) => !isValidScope(scope) || !anyCovers(granted, scope));
      if (refused.length > 0 || requested.length === 0) {
        throw new TokenError("invalid_scope", `not granted to this client: ${refused.join(" ") || "(empty scope)"}`);
      }
      const accessToken = await options.tokens.issue({
        clientId: client.clientId,
        providerId: client.providerId,
        scopes: requested,
        generation: client.tokenGeneration,
      });
      await options.repository.touchClient(client.clientId, options.clock.now());
      writeJson(response, 200, {
        access_token: accessToken,
        token_type: "Bearer",
        expires_in: options.tokens.lifetimeSeconds,
        scope: requested.join(" "),
      });
    } catch (error) {
      discardUnreadBody(request, response);
      if (error instanceof RateLimited) {
        const seconds = retryAfterSeconds(error);
        response.setHeader("Retry-After", String(seconds));
        writeProblem(response, {
          status: 429,
          slug: "rate-limited",
          detail: `too many token requests; retry in ${seconds} s`,
          instance: TOKEN_PATH,
        });
        return;
      }
      if (error instanceof SigningKeyUnavailable) {
        options.logger.error({ err: { message: error.message } }, "access token refused: no signing key to sign with");
        writeProblem(response, { status: 503, slug: "unavailable", detail: error.message, instance: TOKEN_PATH });
        return;
      }
      if (!(error instanceof TokenError)) throw error;
      const status = error.error === "invalid_client" ? 401 : 400;
      if (status === 401) response.setHeader("WWW-Authenticate", 'Basic realm="provision"');
      writeJson(response, status, { error: error.error, error_description: error.message });
    }
  };
}

function warnUnavailable(options: TokenEndpointOptions, error: unknown): void {
  warnThrottled(
    options.logger,
    { err: { message: (error as Error).message } },
    "token rate limit skipped: coordinator unavailable",
  );
}

async function readForm(request: NodeRequest): Promise<URLSearchParams> {
  if (mediaType(request.headers["content-type"]) !== FORM_TYPE) {
    throw new TokenError("invalid_request", `send the request as ${FORM_TYPE}`);
  }
  const encoding = contentEncodingOf(request);
  if (encoding !== "identity") {
    throw new TokenError(
      "invalid_request",
      `send the body uncompressed; content-encoding ${encoding} is not supported`,
    );
  }
  let text: string;
  try {
    text = await getRawBody(request as NodeJS.ReadableStream, {
      limit: FORM_LIMIT_BYTES,
      length: request.headers["content-length"],
      encoding: "utf8",
    });
  } catch (error) {
    throw bodyError(error as getRawBody.RawBodyError);
  }
  // RFC 6749 §3.1: a parameter sent without a value is treated as if it were omitted.
  const form = new URLSearchParams();
  for (const [name, value] of new URLSearchParams(text)) {
    if (value !== "") form.append(name, value);
  }
  for (const name of new Set(form.keys())) {
    if (form.getAll(name).length > 1) throw new TokenError("invalid_request", `${name} is repeated`);
  }
  return form;
}

function mediaType(header: string | undefined): string {
  return header ? parseContentType(header, { parameters: false }).type : "";
}

function bodyError(error: getRawBody.RawBodyError): TokenError {
  switch (error.type) {
    case "entity.too.large":
      return new TokenError("invalid_request", `the request is too large: at most ${FORM_LIMIT_BYTES} bytes`);
    case "request.size.invalid":
      return new TokenError("invalid_request", "the body is shorter or longer than its Content-Length");
    case "request.aborted":
      return new TokenError("invalid_request", "the request body ended early");
    default:
      throw error;
  }
}

/** The presented credentials, with a client id short enough to look up and to count attempts under. */
function clientCredentials(request: NodeRequest, form: URLSearchParams): { clientId: string; clientSecret: string } {
  const credentials = presentedCredentials(request, form);
  if (credentials.clientId.length > CLIENT_ID_MAX_LENGTH) {
    throw new TokenError("invalid_request", `client_id is longer than ${CLIENT_ID_MAX_LENGTH} characters`);
  }
  return credentials;
}

/** client_secret_basic (RFC 6749 §2.3.1, form-encoded then base64) or client_secret_post, never both. */
function presentedCredentials(request: NodeRequest, form: URLSearchParams): { clientId: string; clientSecret: string } {
  const header = request.headers.authorization;
  const basic = typeof header === "string" ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (typeof header === "string" && !basic) {
    const detail = /^Basic(\s|$)/i.test(header)
      ? "malformed Basic credentials: send base64(client_id:client_secret)"
      : "the Authorization header must use the Basic scheme";
    throw new TokenError("invalid_client", detail);
  }
  if (basic) {
    if (form.has("client_secret")) {
      throw new TokenError("invalid_request", "use one client authentication method, not Basic and client_secret");
    }
    const decoded = Buffer.from(basic[1], "base64").toString("utf8");
    const separator = decoded.indexOf(":");
    if (separator < 0) throw new TokenError("invalid_client", "malformed Basic credentials");
    try {
      const clientId = decodeURIComponent(decoded.slice(0, separator).replace(/\+/g, " "));
      const clientSecret = decodeURIComponent(decoded.slice(separator + 1).replace(/\+/g, " "));
      if (form.has("client_id") && form.get("client_id") !== clientId) {
        throw new TokenError("invalid_request", "client_id differs from the Basic credentials");
      }
      if (!clientId || !clientSecret) throw new TokenError("invalid_client", "malformed Basic credentials");
      return { clientId, clientSecret };
    } catch (error) {
      if (error instanceof TokenError) throw error;
      throw new TokenError("invalid_client", "malformed Basic credentials");
    }
  }
  const clientId = form.get("client_id");
  const clientSecret = form.get("client_secret");
  if (!clientId || !clientSecret) {
    throw new TokenError("invalid_client", "authenticate with HTTP Basic or client_id and client_secret");
  }
  return { clientId, clientSecret };
}
