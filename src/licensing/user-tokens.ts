import { createRemoteJWKSet, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
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
  private readonly keys: JWTVerifyGetKey;

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
      ({ payload } = await jwtVerify(token, this.keys, {
        issuer: this.config.issuer,
        audience: this.config.audience,
        algorithms: ALGORITHMS,
        currentDate: this.clock.now(),
      }));
    } catch (error) {
      throw this.refusal(error);
    }
    if (typeof payload.sub !== "string" || payload.sub === "") throw invalidUserToken("it has no `sub` claim");
    return { id: payload.sub, groups: groupsOf(payload.groups) };
  }

  private refusal(error: unknown): DomainError {
    if (error instanceof errors.JWTExpired) return invalidUserToken("it has expired");
    if (error instanceof errors.JWTClaimValidationFailed)
      return invalidUserToken(`its \`${error.claim}\` is not accepted`);
    if (TOKEN_ERRORS.some((kind) => error instanceof kind)) return invalidUserToken("it is not signed by the issuer");
    this.logger.warn(
      { err: { message: (error as Error)?.message }, jwksUrl: this.config.jwksUrl },
      "could not fetch the user-token issuer's keys",
    );
    return new DomainError("unavailable", "the user-token issuer's keys cannot be fetched; try again later", {
      slug: "user-token-issuer-unavailable",
      headers: { "retry-after": "5" },
    });
  }
}

/** No bearer token where an interactive user must sign in. */
export function userTokenRequired(): DomainError {
  return new DomainError("unauthenticated", "sign in: send the user's token as Authorization: Bearer <token>", {
    slug: "authentication-required",
    headers: { "www-authenticate": bearerChallenge() },
  });
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
