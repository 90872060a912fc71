import dns from "node:dns";
import net from "node:net";
import {
  checkAddresses,
  isRefusal,
  type TargetRefusal,
  type TrustedTargets,
  type WebhookTarget,
} from "./target-policy.js";

/** Every address a host name resolves to; rejects when it does not resolve. Tests inject their own. */
export type HostLookup = (hostname: string) => Promise<string[]>;

/** A target's checked addresses; connect to `address`, never to the name again (no DNS rebinding). */
export interface ResolvedTarget {
  address: string;
  addresses: string[];
}

const LOOKUP_TIMEOUT_MS = 10_000;

/** The system resolver (`/etc/hosts`, then DNS), every address in the resolver's order. */
export const systemLookup: HostLookup = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/**
 * Resolves a target once and checks every address it has (target-policy.ts): an IP literal is its own
 * address; a name trusted by name is resolved and exempt. Refused when any address is not allowed, or the
 * name does not resolve (`dns: ...`).
 */
export async function resolveTarget(
  target: WebhookTarget,
  trusted: TrustedTargets,
  lookup: HostLookup = systemLookup,
  timeoutMs = LOOKUP_TIMEOUT_MS,
): Promise<ResolvedTarget | TargetRefusal> {
  const addresses = net.isIP(target.hostname) ? [target.hostname] : await lookUp(target.hostname, lookup, timeoutMs);
  if (isRefusal(addresses)) return addresses;
  if (!target.trustedName) {
    const refusal = checkAddresses(addresses, trusted, target.url.protocol);
    if (refusal) return refusal;
  }
  return { address: addresses[0], addresses };
}

async function lookUp(hostname: string, lookup: HostLookup, timeoutMs: number): Promise<string[] | TargetRefusal> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<TargetRefusal>((resolve) => {
    timer = setTimeout(() => resolve({ refusal: `dns: time-out resolving ${hostname}` }), timeoutMs);
  });
  const answer = lookup(hostname).then(
    (found) => [...new Set(found)],
    (error: NodeJS.ErrnoException) => ({ refusal: `dns: ${error.code ?? error.message} resolving ${hostname}` }),
  );
  try {
    const addresses = await Promise.race([answer, timeout]);
    if (isRefusal(addresses)) return addresses;
    if (addresses.length === 0) return { refusal: `dns: no address for ${hostname}` };
    const notAddress = addresses.find((address) => net.isIP(address) === 0);
    return notAddress === undefined ? addresses : { refusal: `dns: ${hostname} gave ${notAddress}, no IP address` };
  } finally {
    clearTimeout(timer);
  }
}
