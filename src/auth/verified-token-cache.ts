import { createHash } from "node:crypto";

/** How many verified tokens one instance remembers; the least recently used is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

interface Entry<Claims> {
  claims: Claims;
  /** The last instant (ms) the token is accepted, clock skew included. */
  acceptedUntilMs: number;
}

/**
 * Tokens (access tokens, license tokens) whose signature and claims were verified, keyed by a hash of the
 * token, kept until they are no longer accepted: a repeat caller costs a lookup, not a signature check. Whether
 * the token was revoked since is not this cache's business (its caller checks that on every call).
 */
export class VerifiedTokenCache<Claims> {
  private readonly entries = new Map<string, Entry<Claims>>();

  constructor(private readonly capacity = VERIFIED_TOKEN_CACHE_SIZE) {}

  get(token: string, nowMs: number): Claims | undefined {
    const key = keyOf(token);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (nowMs > entry.acceptedUntilMs) return undefined;
    this.entries.set(key, entry);
    return entry.claims;
  }

  set(token: string, claims: Claims, acceptedUntilMs: number): void {
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
