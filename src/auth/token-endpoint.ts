import type { Clock } from "../platform/clock.js";
import type { Coordinator, RateDecision } from "../platform/coordinator.js";
import type { Logger } from "../platform/logger.js";
import { addressBucket, clientAddressOf } from "../server/client-address.js";
import { writeJson, writeProblem } from "../server/http-responses.js";
import type { NodeRequest, NodeResponse } from "../server/rest/rest-handler.js";
import type { AccessTokens } from "./access-tokens.js";
import type { IdentityRepository } from "./identity-repository.js";
import { anyCovers, isValidScope, parseScopeList } from "./scopes.js";
import { DECOY_HASH, verifySecret } from "./secrets.js";

export const TOKEN_PATH = "/auth/connect/token";
const FORM_LIMIT_BYTES = 16 * 1024;
const RATE_WINDOW_MS = 60_000;

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

class RateLimited extends Error {
  constructor(readonly retryAfterMs: number) {
    super("too many token requests");
  }
}

/** The OAuth 2.0 token endpoint (RFC 6749 §4.4): client credentials for a short-lived access token. */
export function createTokenEndpoint(options: TokenEndpointOptions) {
  return async function handleTokenRequest(request: NodeRequest, response: NodeResponse): Promise<void> {
    response.setHeader("Cache-Control", "no-store");
    response.setHeader("Pragma", "no-cache");
    if (request.method !== "POST") {
      response.setHeader("Allow", "POST");
      writeJson(response, 405, { error: "invalid_request", error_description: "use POST" });
      return;
    }
    try {
      const address = addressBucket(clientAddressOf(request));
      await limit(options, `token:address:${address}`, options.limits.perAddress);
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
        options,
        `${found?.clientId ?? credentials.clientId}:${address}`,
        options.limits.perClient,
      );
      const secretMatches = await verifySecret(credentials.clientSecret, found?.secretHash ?? DECOY_HASH);
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
      await options.repository.updateClient(client.clientId, { lastUsedAt: options.clock.now() });
      writeJson(response, 200, {
        access_token: accessToken,
        token_type: "Bearer",
        expires_in: options.tokens.lifetimeSeconds,
        scope: requested.join(" "),
      });
    } catch (error) {
      if (error instanceof RateLimited) {
        const seconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
        response.setHeader("Retry-After", String(seconds));
        writeProblem(response, {
          status: 429,
          slug: "rate-limited",
          detail: `too many token requests; retry in ${seconds} s`,
          instance: TOKEN_PATH,
        });
        return;
      }
      if (!(error instanceof TokenError)) throw error;
      const status = error.error === "invalid_client" ? 401 : 400;
      if (status === 401) response.setHeader("WWW-Authenticate", 'Basic realm="provision"');
      writeJson(response, status, { error: error.error, error_description: error.message });
    }
  };
}

/**
 * Counts one authentication attempt of a client id from an address, atomically and before the secret is
 * checked, and refuses it when the attempts of the window, less its successful ones, exceed `allowed`. So
 * however many wrong secrets arrive at once, exactly `allowed` of them are checked in a window and the rest
 * answer 429 (from that address the right secret too, until the window ends); elsewhere nobody is affected.
 * Successes are counted apart, in a counter that ends with the attempts' window, and never use up the limit.
 * Reading the successes before counting the attempt keeps the bound exact: a success counted in between is one
 * this attempt does not subtract.
 */
async function countAttempt(
  options: TokenEndpointOptions,
  subject: string,
  allowed: number,
): Promise<{ succeeded(): Promise<void> }> {
  const attemptsKey = `token:attempts:${subject}`;
  const successesKey = `token:successes:${subject}`;
  const started = performance.now();
  let successes: number;
  let attempts: RateDecision;
  try {
    successes = (await options.coordinator.peek(successesKey)).count;
    attempts = await options.coordinator.hit(attemptsKey, Number.MAX_SAFE_INTEGER, RATE_WINDOW_MS);
  } catch (error) {
    warnUnavailable(options, error);
    return { succeeded: async () => {} };
  }
  if (attempts.count - successes > allowed) throw new RateLimited(attempts.retryAfterMs);
  return {
    async succeeded() {
      // Never past the attempts' window: carried into the next one, it would let more failures through there.
      const windowLeftMs = Math.floor(attempts.retryAfterMs - (performance.now() - started));
      if (windowLeftMs <= 0) return;
      try {
        await options.coordinator.hit(successesKey, Number.MAX_SAFE_INTEGER, windowLeftMs);
      } catch (error) {
        warnUnavailable(options, error);
      }
    },
  };
}

function warnUnavailable(options: TokenEndpointOptions, error: unknown): void {
  options.logger.warn(
    { err: { message: (error as Error).message } },
    "token rate limit skipped: coordinator unavailable",
  );
}

/**
 * Counts one request against `key`. When the coordinator is unreachable the request goes through unlimited
 * (and a warning is logged): losing Redis must not lock every client out.
 */
async function limit(options: TokenEndpointOptions, key: string, allowed: number): Promise<void> {
  let decision: RateDecision;
  try {
    decision = await options.coordinator.hit(key, allowed, RATE_WINDOW_MS);
  } catch (error) {
    options.logger.warn(
      { err: { message: (error as Error).message } },
      "token rate limit skipped: coordinator unavailable",
    );
    return;
  }
  if (!decision.allowed) throw new RateLimited(decision.retryAfterMs);
}

async function readForm(request: NodeRequest): Promise<URLSearchParams> {
  const mediaType = String(request.headers["content-type"] ?? "")
    .split(";")[0]
    .trim()
    .toLowerCase();
  if (mediaType !== "application/x-www-form-urlencoded") {
    request.resume();
    throw new TokenError("invalid_request", "send the request as application/x-www-form-urlencoded");
  }
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > FORM_LIMIT_BYTES) throw new TokenError("invalid_request", "the request is too large");
    chunks.push(chunk);
  }
  // RFC 6749 §3.1: a parameter sent without a value is treated as if it were omitted.
  const form = new URLSearchParams();
  for (const [name, value] of new URLSearchParams(Buffer.concat(chunks).toString("utf8"))) {
    if (value !== "") form.append(name, value);
  }
  for (const name of new Set(form.keys())) {
    if (form.getAll(name).length > 1) throw new TokenError("invalid_request", `${name} is repeated`);
  }
  return form;
}

/** client_secret_basic (RFC 6749 §2.3.1, form-encoded then base64) or client_secret_post, never both. */
function clientCredentials(request: NodeRequest, form: URLSearchParams): { clientId: string; clientSecret: string } {
  const header = request.headers.authorization;
  const basic = typeof header === "string" ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (typeof header === "string" && !basic) {
    throw new TokenError("invalid_client", "the Authorization header must use the Basic scheme");
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
