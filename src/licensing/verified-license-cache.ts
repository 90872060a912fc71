import type { AccessTokenClaims } from "../auth/access-tokens.js";
import { VerifiedTokenCache } from "../auth/verified-token-cache.js";
import type { LicenseClaims } from "./license-claims.js";

/**
 * Verified license tokens, kept until the end of their grace period: the access tokens' LRU cache (keyed by a
 * hash of the token, never the token), which stores the claims it is given without reading them.
 */
export class VerifiedLicenseCache {
  private readonly tokens: VerifiedTokenCache;

  constructor(capacity?: number) {
    this.tokens = new VerifiedTokenCache(capacity);
  }

  get(token: string, nowMs: number): LicenseClaims | undefined {
    return this.tokens.get(token, nowMs) as unknown as LicenseClaims | undefined;
  }

  set(token: string, claims: LicenseClaims, acceptedUntilMs: number): void {
    this.tokens.set(token, claims as unknown as AccessTokenClaims, acceptedUntilMs);
  }

  get size(): number {
    return this.tokens.size;
  }
}
