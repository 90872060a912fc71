import { randomUUID } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { Clock } from "../platform/clock.js";
import { DomainError } from "../platform/errors.js";
import { SingleFlight } from "../platform/single-flight.js";
import { CLOCK_SKEW_SECONDS, type KeyStore, TOKEN_ALGORITHM } from "./key-store.js";
import { VerifiedTokenCache } from "./verified-token-cache.js";

export const ACCESS_TOKEN_TYPE = "at+jwt";
export const ACCESS_TOKEN_AUDIENCE = "provision-api";

export interface AccessTokenClaims {
  clientId: string;
  providerId: string;
  scopes: string[];
  /** The client's token generation when the token was issued (private claim `gen`). */
  generation: string;
  /** A webhook callback token's subscription (private claim `whs`). */
  subscriptionId?: string;
}

export interface IssueOptions {
  /** Instead of the service's access token lifetime. */
  lifetimeSeconds?: number;
  /** Private claims added to the token; they never replace a registered or access token claim. */
  extraClaims?: Record<string, string>;
}

/** OAuth 2.0 access tokens as JWTs (RFC 9068) signed with the service's own key. */
export class AccessTokens {
  private readonly verified = new VerifiedTokenCache<AccessTokenClaims>();
  private readonly verifying = new SingleFlight<AccessTokenClaims>();
  private checks = 0;

  constructor(
    private readonly keys: KeyStore,
    private readonly clock: Clock,
    private readonly issuer: string,
    readonly lifetimeSeconds: number,
  ) {}

  async issue(claims: AccessTokenClaims, options: IssueOptions = {}): Promise<string> {
    const { kid, privateKey } = await this.keys.signingKey();
    const now = Math.floor(this.clock.now().getTime() / 1000);
    return new SignJWT({
      ...options.extraClaims,
      scope: claims.scopes.join(" "),
      client_id: claims.clientId,
      provider_id: claims.providerId,
      gen: claims.generation,
    })
      .setProtectedHeader({ alg: TOKEN_ALGORITHM, kid, typ: ACCESS_TOKEN_TYPE })
      .setIssuer(this.issuer)
      .setSubject(claims.clientId)
      .setAudience(ACCESS_TOKEN_AUDIENCE)
      .setIssuedAt(now)
      .setExpirationTime(now + (options.lifetimeSeconds ?? this.lifetimeSeconds))
      .setJti(randomUUID())
      .sign(privateKey);
  }

  /** How many signatures `verify` has checked: a repeat answered from memory checks none. */
  get signatureChecks(): number {
    return this.checks;
  }

  /**
   * The claims of a valid token; an `unauthenticated` DomainError saying why otherwise. A token verified once
   * is remembered until it expires, so its signature is checked once per instance; requests that bring a token
   * not seen yet at once (a client's first burst, an instance just started) wait for that one check.
   */
  async verify(token: string): Promise<AccessTokenClaims> {
    const nowMs = this.clock.now().getTime();
    const remembered = this.verified.get(token, nowMs);
    if (remembered) return remembered;
    return this.verifying.run(token, async () => {
      const { claims, expiresAt } = await this.verifySignedToken(token);
      this.verified.set(token, claims, (expiresAt + CLOCK_SKEW_SECONDS) * 1000, nowMs);
      return claims;
    });
  }

  private async verifySignedToken(token: string): Promise<{ claims: AccessTokenClaims; expiresAt: number }> {
    this.checks++;
    try {
      const { payload } = await jwtVerify(
        token,
        async (header) => {
          const key = header.kid ? await this.keys.verificationKey(header.kid) : undefined;
          if (!key) throw new joseErrors.JWKSNoMatchingKey();
          return key;
        },
        {
          algorithms: [TOKEN_ALGORITHM],
          issuer: this.issuer,
          audience: ACCESS_TOKEN_AUDIENCE,
          typ: ACCESS_TOKEN_TYPE,
          clockTolerance: CLOCK_SKEW_SECONDS,
          currentDate: this.clock.now(),
          requiredClaims: ["sub", "exp", "iat"],
        },
      );
      const {
        sub,
        exp,
        scope,
        provider_id: providerId,
        gen: generation,
        whs: subscriptionId,
      } = payload as {
        sub: string;
        exp: number;
        scope?: unknown;
        provider_id?: unknown;
        gen?: unknown;
        whs?: unknown;
      };
      if (typeof scope !== "string" || typeof providerId !== "string" || typeof generation !== "string")
        throw new joseErrors.JWTInvalid("missing scope, provider_id or gen claim");
      if (subscriptionId !== undefined && typeof subscriptionId !== "string")
        throw new joseErrors.JWTInvalid("whs claim is not a string");
      const scopes = scope.split(" ").filter(Boolean);
      return {
        claims: { clientId: sub, providerId, scopes, generation, ...(subscriptionId ? { subscriptionId } : {}) },
        expiresAt: exp,
      };
    } catch (error) {
      const expired = error instanceof joseErrors.JWTExpired;
      throw new DomainError(
        "unauthenticated",
        expired ? "the access token has expired" : "the access token is not valid",
        {
          slug: "invalid-token",
          headers: { "www-authenticate": bearerChallenge("invalid_token", expired ? "expired" : "invalid token") },
        },
      );
    }
  }
}

export function bearerChallenge(error?: string, description?: string, scope?: string): string {
  const parts = ['Bearer realm="provision"'];
  if (error) parts.push(`error="${error}"`);
  if (description) parts.push(`error_description="${description}"`);
  if (scope) parts.push(`scope="${scope}"`);
  return parts.join(", ");
}
