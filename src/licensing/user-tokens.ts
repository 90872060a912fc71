import {
  createRemoteJWKSet,
  errors,
  type JWSHeaderParameters,
  type JWTPayload,
  jwtVerify,
  type RemoteJWKSet,
} from "jose";
import { bearerChallenge } from "../auth/access-tokens.js";
import type { Clock } from "../platform/clock.js";
import type { UserTokenConfig } from "../platform/config.js";
import { DomainError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";

/** A user signed in by the trusted issuer: `sub` and the `groups` claim. */
export interface InteractiveUser {
  id: string;
  groups: string[];
}

const ALGORITHMS = ["RS256", "ES256", "EdDSA"];
/** A longer `groups` claim is refused: each group is one bound parameter of the invitation lookup. */
export const MAX_USER_GROUPS = 1000;
const JWKS_TIMEOUT_MS = 3000;
/** Least time between two fetches of the key set (an unknown `kid` makes jose fetch it again). */
const JWKS_COOLDOWN_MS = 30_000;
const JWKS_MAX_AGE_MS = 10 * 60_000;
/** After a failed fetch, tokens that would need another are answered 503 this long without one (Retry-After). */
const JWKS_RETRY_AFTER_S = 5;

/** Errors that say the token itself is bad (as opposed to the issuer's key set being out of reach). */
const TOKEN_ERRORS = [
  errors.JWTExpired,
  errors.JWTClaimValidationFailed,
  errors.JWTInvalid,
  errors.JWSInvalid,
  errors.JWSSignatureVerificationFailed,
  errors.JWKSNoMatchingKey,
  errors.JWKSMultipleMatchingKeys,
  errors.JOSEAlgNotAllowed,
  errors.JOSENotSupported,
];

/** Verifies interactive users' bearer tokens against the one configured issuer's published keys. */
export class UserTokens {
  private readonly keys: RemoteJWKSet;
  /** Until when a token needing a fetch is answered 503 at once: jose's cooldown follows successful fetches only. */
  private unreachableUntilMs = 0;

  constructor(
    private readonly config: UserTokenConfig,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.keys = createRemoteJWKSet(new URL(config.jwksUrl), {
      timeoutDuration: JWKS_TIMEOUT_MS,
      cooldownDuration: JWKS_COOLDOWN_MS,
      cacheMaxAge: JWKS_MAX_AGE_MS,
    });
  }

  /** The user a token signs in; 401 `invalid-user-token` (503 when the key set cannot be fetched). */
  async verify(token: string): Promise<InteractiveUser> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (header) => this.keyOf(header), {
        issuer: this.config.issuer,
        audience: this.config.audience,
        algorithms: ALGORITHMS,
        requiredClaims: ["exp"],
        currentDate: this.clock.now(),
      }));
    } catch (error) {
      throw this.refusal(error);
    }
    if (typeof payload.sub !== "string" || payload.sub === "") throw invalidUserToken("it has no `sub` claim");
    return { id: payload.sub, groups: groupsOf(payload.groups) };
  }

  /**
   * The key of a token's header, fetching the key set only when kept keys cannot tell and no fetch just failed.
   * A `kid` not kept while jose's cooldown holds off a fetch may be a key the issuer has just added: not a verdict.
   */
  private async keyOf(header: JWSHeaderParameters) {
    const now = this.clock.now().getTime();
    const fresh = this.keys.fresh;
    const keys = fresh ? (this.keys.jwks()?.keys ?? []) : [];
    const kept = header.kid === undefined ? keys.length > 0 : keys.some((key) => key.kid === header.kid);
    if (now < this.unreachableUntilMs && !kept) throw new KeySetUnreachable();
    const fetchHeldOff = fresh && this.keys.coolingDown;
    try {
      return await this.keys(header);
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey && fetchHeldOff && !kept) throw new KeyNotFetchedYet();
      if (!isTokenError(error)) this.unreachableUntilMs = now + JWKS_RETRY_AFTER_S * 1000;
      throw error;
    }
  }

  private refusal(error: unknown): DomainError {
    if (error instanceof errors.JWTExpired) return invalidUserToken("it has expired");
    if (error instanceof errors.JWTClaimValidationFailed && error.reason === "missing")
      return invalidUserToken(`it has no \`${error.claim}\` claim`);
    if (error instanceof errors.JWTClaimValidationFailed)
      return invalidUserToken(`its \`${error.claim}\` is not accepted`);
    if (isTokenError(error)) return invalidUserToken("it is not signed by the issuer");
    if (error instanceof KeyNotFetchedYet) {
      return issuerUnavailable(
        "the user token's key is not among the issuer's keys fetched so far; retry",
        JWKS_COOLDOWN_MS,
      );
    }
    if (!(error instanceof KeySetUnreachable)) {
      this.logger.warn(
        { err: { message: (error as Error)?.message }, jwksUrl: this.config.jwksUrl },
        "could not fetch the user-token issuer's keys",
      );
    }
    return issuerUnavailable(
      "the user-token issuer's keys cannot be fetched; try again later",
      JWKS_RETRY_AFTER_S * 1000,
    );
  }
}

/** 503 `user-token-issuer-unavailable`: no verdict on the token yet; retry after `retryAfterMs`. */
function issuerUnavailable(message: string, retryAfterMs: number): DomainError {
  return new DomainError("unavailable", message, {
    slug: "user-token-issuer-unavailable",
    headers: { "retry-after": String(retryAfterMs / 1000) },
  });
}

/** The last fetch of the key set failed moments ago; not tried again yet. */
class KeySetUnreachable extends Error {}

/** The token's key is not kept, and the key set was fetched too recently to fetch it again. */
class KeyNotFetchedYet extends Error {}

function isTokenError(error: unknown): boolean {
  return TOKEN_ERRORS.some((kind) => error instanceof kind);
}

/** Interactive-user activation asked of a deployment that trusts no user-token issuer. */
export function interactiveUserNotConfigured(): DomainError {
  return new DomainError(
    "permission-denied",
    "this service signs in no interactive users (USER_TOKEN_ISSUER is not configured): activate with an activation code",
    { slug: "interactive-user-not-configured" },
  );
}

function invalidUserToken(reason: string): DomainError {
  return new DomainError("unauthenticated", `the user token is not valid: ${reason}`, {
    slug: "invalid-user-token",
    headers: { "www-authenticate": bearerChallenge("invalid_token", "invalid user token") },
  });
}

function groupsOf(claim: unknown): string[] {
  if (!Array.isArray(claim)) return [];
  if (claim.length > MAX_USER_GROUPS) throw invalidUserToken(`its groups claim lists more than ${MAX_USER_GROUPS}`);
  return claim.filter((group): group is string => typeof group === "string" && group !== "");
}
