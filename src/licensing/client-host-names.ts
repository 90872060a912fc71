import { Resolver } from "node:dns/promises";
import net from "node:net";
import type { Clock } from "../platform/clock.js";
import { DomainError } from "../platform/errors.js";

/** Reverse-DNS names of an address; rejects when it has none or the lookup fails. */
export type ReverseLookup = (address: string) => Promise<string[]>;

const LOOKUP_TIMEOUT_MS = 1500;
const NAMES_TTL_MS = 60_000;
/** A failed lookup is remembered for less time than an answer: it may be a passing outage. */
const FAILURE_TTL_MS = 10_000;
const MAX_CACHED_ADDRESSES = 10_000;
const MAX_NAMES = 32;

/** The system resolver, one try, short timeout. */
export function dnsReverseLookup(): ReverseLookup {
  const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 1 });
  return (address) => resolver.reverse(address);
}

/**
 * The host names of callers' addresses (reverse DNS), cached briefly per address. A failed lookup, a timeout
 * and an address that is no IP all give no names, so an ACL refuses them.
 */
export class ClientHostNames {
  private readonly cache = new Map<string, { names: string[]; expiresAt: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly lookup: ReverseLookup = dnsReverseLookup(),
  ) {}

  /** The names if known and fresh, else undefined (then `resolve`, outside any transaction). */
  cached(address: string): string[] | undefined {
    const entry = this.cache.get(address);
    if (!entry) return undefined;
    if (entry.expiresAt > this.clock.now().getTime()) return entry.names;
    this.cache.delete(address);
    return undefined;
  }

  async resolve(address: string): Promise<string[]> {
    const known = this.cached(address);
    if (known) return known;
    const names = net.isIP(address) ? await this.lookUp(address) : [];
    this.remember(address, names);
    return names;
  }

  private async lookUp(address: string): Promise<string[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string[]>((resolve) => {
      timer = setTimeout(() => resolve([]), LOOKUP_TIMEOUT_MS);
    });
    try {
      const names = await Promise.race([this.lookup(address).catch(() => []), timeout]);
      return names.slice(0, MAX_NAMES).map(normalized);
    } finally {
      clearTimeout(timer);
    }
  }

  private remember(address: string, names: string[]): void {
    if (this.cache.size >= MAX_CACHED_ADDRESSES) {
      const oldest = this.cache.keys().next();
      if (!oldest.done) this.cache.delete(oldest.value);
    }
    const ttl = names.length > 0 ? NAMES_TTL_MS : FAILURE_TTL_MS;
    this.cache.set(address, { names, expiresAt: this.clock.now().getTime() + ttl });
  }
}

/**
 * Whether one of the caller's names is allowed: an entry is a host name, matched exactly, or `*.domain`,
 * matching any name under `domain` (not `domain` itself). Case-insensitive; a trailing dot is ignored.
 */
export function hostAllowed(allowed: string[], names: string[]): boolean {
  return names
    .map(normalized)
    .some((name) =>
      allowed
        .map(normalized)
        .some((entry) => (entry.startsWith("*.") ? name.endsWith(entry.slice(1)) : name === entry)),
    );
}

/** Refuses a caller none of whose names the entitlement's requireAclHostNameMember allows. */
export function checkHostAllowed(allowed: string[], names: string[]): void {
  if (allowed.length === 0 || hostAllowed(allowed, names)) return;
  throw new DomainError(
    "permission-denied",
    "activation is allowed only from the host names the entitlement lists, and this caller's address has none of them",
    { slug: "host-not-allowed" },
  );
}

function normalized(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, "");
}
