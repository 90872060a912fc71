/** How many verified tokens one instance remembers; the least recently used is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

interface Entry<Claims> {
  /** The whole token verified: a token is remembered only when it is exactly this one. */
  token: string;
  claims: Claims;
  /** The last instant (ms) the token is accepted, clock skew included. */
  acceptedUntilMs: number;
}

/**
 * Tokens (access tokens, license tokens) whose signature and claims were verified, kept until they are no
 * longer accepted: a repeat caller costs a lookup, not a signature check. Whether the token was revoked since
 * is not this cache's business (its caller checks that on every call).
 *
 * Entries are found by the token's signature segment (no two tokens verified share one) and then compared
 * whole: cheaper per call than hashing the token, for the memory of keeping each token.
 */
export class VerifiedTokenCache<Claims> {
  private readonly entries = new Map<string, Entry<Claims>>();

  constructor(private readonly capacity = VERIFIED_TOKEN_CACHE_SIZE) {}

  get(token: string, nowMs: number): Claims | undefined {
    const key = keyOf(token);
    const entry = this.entries.get(key);
    if (!entry || entry.token !== token) return undefined;
    this.entries.delete(key);
    if (nowMs > entry.acceptedUntilMs) return undefined;
    this.entries.set(key, entry);
    return entry.claims;
  }

  set(token: string, claims: Claims, acceptedUntilMs: number): void {
    const key = keyOf(token);
    this.entries.delete(key);
    this.entries.set(key, { token, claims, acceptedUntilMs });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** The signature segment of a JWS compact token (its last). */
function keyOf(token: string): string {
  return token.slice(token.lastIndexOf(".") + 1);
}
