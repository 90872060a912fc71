import { createHash } from "node:crypto";
import type { AccessTokenClaims } from "./access-tokens.js";

/** How many verified tokens one instance remembers; the least recently used is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

interface Entry {
  claims: AccessTokenClaims;
  /** The last instant (ms) the token is accepted, clock skew included. */
  acceptedUntilMs: number;
}

/**
 * Access tokens whose signature and claims were verified, keyed by a hash of the token, kept until they
 * expire: a repeat caller costs a lookup, not a signature check. Whether the token was revoked since is not
 * this cache's business (the client's token generation is checked on every call).
 */
export class VerifiedTokenCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly capacity = VERIFIED_TOKEN_CACHE_SIZE) {}

  get(token: string, nowMs: number): AccessTokenClaims | undefined {
    const key = keyOf(token);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (nowMs > entry.acceptedUntilMs) return undefined;
    this.entries.set(key, entry);
    return entry.claims;
  }

  set(token: string, claims: AccessTokenClaims, acceptedUntilMs: number): void {
    const key = keyOf(token);
    this.entries.delete(key);
    this.entries.set(key, { claims, acceptedUntilMs });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
  }

  get size(): number {
    return this.entries.size;
  }
}

function keyOf(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}
