import { setNewest } from "../platform/bounded-map.js";

/** How many verified tokens one instance remembers; the least recently used is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

interface Entry<Claims> {
  /** The whole token verified: a token is remembered only when it is exactly this one. */
  token: string;
  claims: Claims;
  /** The last instant (ms) the token is accepted, clock skew included. */
  acceptedUntilMs: number;
  /** When the entry last became the most recently used. */
  usedAtMs: number;
}

/** An entry used again within this long keeps its place in the eviction order (moving it costs on every call). */
const REORDER_AFTER_MS = 1000;
/** Characters of the signature that find an entry: 132 bits, so two tokens never share them in practice. */
const KEY_LENGTH = 22;

/**
 * Tokens (access tokens, license tokens) whose signature and claims were verified, kept until they are no
 * longer accepted: a repeat caller costs a lookup, not a signature check. Whether the token was revoked since
 * is not this cache's business (its caller checks that on every call).
 *
 * Entries are found by the end of the token's signature (no two tokens verified share it) and then compared
 * whole: cheaper per call than hashing the token, for the memory of keeping each token. The eviction order is
 * least recently used to within a second.
 */
export class VerifiedTokenCache<Claims> {
  private readonly entries = new Map<string, Entry<Claims>>();

  constructor(private readonly capacity = VERIFIED_TOKEN_CACHE_SIZE) {}

  get(token: string, nowMs: number): Claims | undefined {
    const key = keyOf(token);
    const entry = this.entries.get(key);
    if (!entry || entry.token !== token) return undefined;
    if (nowMs > entry.acceptedUntilMs) {
      this.entries.delete(key);
      return undefined;
    }
    if (nowMs - entry.usedAtMs > REORDER_AFTER_MS) {
      this.entries.delete(key);
      this.entries.set(key, entry);
      entry.usedAtMs = nowMs;
    }
    return entry.claims;
  }

  set(token: string, claims: Claims, acceptedUntilMs: number, nowMs: number): void {
    const key = keyOf(token);
    setNewest(this.entries, key, { token, claims, acceptedUntilMs, usedAtMs: nowMs }, this.capacity);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** The end of a JWS compact token's signature segment (its last). */
function keyOf(token: string): string {
  return token.slice(Math.max(token.lastIndexOf(".") + 1, token.length - KEY_LENGTH));
}
