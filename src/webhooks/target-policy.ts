import net from "node:net";

// Server-side request forgery rules for webhook URLs: only https to public addresses, unless the operator
// trusts the target (WEBHOOK_TRUSTED_TARGETS). Checked at creation and again at every delivery attempt.

/** The targets WEBHOOK_TRUSTED_TARGETS exempts: host names (lower case, no trailing dot) and networks. */
export interface TrustedTargets {
  readonly names: ReadonlySet<string>;
  readonly networks: net.BlockList;
  readonly isEmpty: boolean;
}

/** A webhook URL that passed the URL rules; its addresses are still to be checked (safe-resolve.ts). */
export interface WebhookTarget {
  url: URL;
  /** The URL's host name without IPv6 brackets or a trailing dot: an IP address or a DNS name. */
  hostname: string;
  port: number;
  /** The host name is listed by name in WEBHOOK_TRUSTED_TARGETS: exempt from the address rules. */
  trustedName: boolean;
}

/** Why a target is not allowed, for a problem detail or an attempt's error. */
export interface TargetRefusal {
  refusal: string;
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const NUMERIC_LABEL = /^(\d+|0x[0-9a-f]*)$/;

/** Parses WEBHOOK_TRUSTED_TARGETS; throws an Error naming the first entry that is no name, address or CIDR. */
export function parseTrustedTargets(text: string | undefined): TrustedTargets {
  const names = new Set<string>();
  const networks = new net.BlockList();
  const entries = (text ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  for (const entry of entries) {
    if (!addNetwork(networks, entry) && !addName(names, entry)) {
      throw new Error(`${JSON.stringify(entry)} is not a host name, an IP address or a CIDR network`);
    }
  }
  return { names, networks, isEmpty: entries.length === 0 };
}

/** Adds an address or a network with a prefix of 1-32 (IPv4) or 1-128 (IPv6); false if the entry is neither. */
function addNetwork(networks: net.BlockList, entry: string): boolean {
  const [address, prefix, extra] = entry.split("/");
  const family = net.isIP(address);
  if (family === 0 || extra !== undefined || address.includes("%")) return false;
  const type = family === 4 ? "ipv4" : "ipv6";
  if (prefix === undefined) {
    networks.addAddress(address, type);
    return true;
  }
  const bits = /^\d{1,3}$/.test(prefix) ? Number(prefix) : 0;
  if (bits < 1 || bits > (family === 4 ? 32 : 128)) return false;
  networks.addSubnet(address, bits, type);
  return true;
}

/** Adds an RFC 1123 host name; false if it is none, or would be read as an IPv4 address in a URL. */
function addName(names: Set<string>, entry: string): boolean {
  const name = entry.toLowerCase().replace(/\.$/, "");
  const labels = name.split(".");
  if (name.length > 253 || !labels.every((label) => LABEL.test(label))) return false;
  if (NUMERIC_LABEL.test(labels[labels.length - 1])) return false;
  names.add(name);
  return true;
}

/**
 * Checks a webhook URL's form: absolute, `https:` (or `http:` when some target is trusted), no user name or
 * password, a host, a port other than 0, no `localhost` name unless trusted by name. The fragment is dropped.
 */
export function checkWebhookUrl(text: string, trusted: TrustedTargets): WebhookTarget | TargetRefusal {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { refusal: "url must be an absolute http(s) URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { refusal: `scheme ${url.protocol} is not allowed: use https (or http for a trusted target)` };
  }
  if (url.username || url.password) return { refusal: "url must not contain a user name or password" };
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  if (!hostname) return { refusal: "url has no host" };
  if (url.port === "0") return { refusal: "port 0 is not allowed" };
  if (url.protocol === "http:" && trusted.isEmpty) {
    return { refusal: "http is allowed only for targets in WEBHOOK_TRUSTED_TARGETS: use https" };
  }
  const trustedName = net.isIP(hostname) === 0 && trusted.names.has(hostname);
  if (isLocalhostName(hostname) && !trustedName) {
    return { refusal: `${hostname} is allowed only when WEBHOOK_TRUSTED_TARGETS lists it by name` };
  }
  url.hash = "";
  const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  return { url, hostname, port, trustedName };
}

/** `localhost` and the names under it always mean this host (RFC 6761), whatever a resolver says. */
function isLocalhostName(hostname: string): boolean {
  return hostname === "localhost" || hostname.endsWith(".localhost");
}

export function isRefusal(value: object): value is TargetRefusal {
  return "refusal" in value;
}

/**
 * Refuses the addresses unless each is public or trusted, and, for `http:` (URL protocol), unless each is
 * trusted. Undefined when they are all allowed.
 */
export function checkAddresses(
  addresses: readonly string[],
  trusted: TrustedTargets,
  protocol: string,
): TargetRefusal | undefined {
  for (const address of addresses) {
    const isTrusted = isTrustedAddress(address, trusted);
    if (!isTrusted && !isPublicAddress(address)) return { refusal: `address not allowed: ${address}` };
    if (!isTrusted && protocol !== "https:") return { refusal: `http not allowed: ${address} is not a trusted target` };
  }
  return undefined;
}

/** Whether the address, or the IPv4 address an IPv4-mapped one carries, is in a trusted network. */
export function isTrustedAddress(address: string, trusted: TrustedTargets): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  if (trusted.networks.check(address, family === 4 ? "ipv4" : "ipv6")) return true;
  const mapped = family === 6 ? embeddedIpv4(hextets(address), MAPPED_PREFIX) : undefined;
  return mapped !== undefined && trusted.networks.check(mapped, "ipv4");
}

const NON_PUBLIC_IPV4: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local (cloud metadata services)
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, and 255.255.255.255 broadcast
];

const NON_PUBLIC_IPV6: [string, number][] = [
  ["::", 96], // unspecified, loopback and the deprecated IPv4-compatible addresses
  ["::ffff:0:0:0", 96], // IPv4-translated
  ["64:ff9b:1::", 48], // local-use IPv4/IPv6 translation
  ["100::", 64], // discard-only
  ["2001::", 23], // IETF protocol assignments, Teredo included
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4
  ["3fff::", 20], // documentation
  ["5f00::", 16], // segment routing
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local
  ["ff00::", 8], // multicast
];

const NON_PUBLIC = new net.BlockList();
for (const [network, prefix] of NON_PUBLIC_IPV4) NON_PUBLIC.addSubnet(network, prefix, "ipv4");
for (const [network, prefix] of NON_PUBLIC_IPV6) NON_PUBLIC.addSubnet(network, prefix, "ipv6");

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0xffff];
const NAT64_PREFIX = [0x64, 0xff9b, 0, 0, 0, 0];

/**
 * Whether an IP address is globally reachable: false for the special-purpose ranges (private, loopback,
 * link-local, documentation, multicast, ...) and for anything that is no IP address. IPv4-mapped
 * (`::ffff:a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`) addresses are classified by the IPv4 address they carry.
 */
export function isPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return !NON_PUBLIC.check(address, "ipv4");
  if (family !== 6) return false;
  const groups = hextets(address);
  const embedded = embeddedIpv4(groups, MAPPED_PREFIX) ?? embeddedIpv4(groups, NAT64_PREFIX);
  if (embedded !== undefined) return !NON_PUBLIC.check(embedded, "ipv4");
  return !NON_PUBLIC.check(address, "ipv6");
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a dotted IPv4 tail converted, zone dropped). */
function hextets(address: string): number[] {
  const [head, tail] = address.replace(/%.*$/, "").split("::");
  const groupsOf = (part: string | undefined): number[] =>
    part ? part.split(":").flatMap((group) => (group.includes(".") ? ipv4Groups(group) : [parseInt(group, 16)])) : [];
  const left = groupsOf(head);
  const right = groupsOf(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function ipv4Groups(dotted: string): number[] {
  const [a, b, c, d] = dotted.split(".").map(Number);
  return [(a << 8) | b, (c << 8) | d];
}

/** The dotted IPv4 address in the last 32 bits when the first 96 bits are `prefix`. */
function embeddedIpv4(groups: number[], prefix: number[]): string | undefined {
  if (!prefix.every((group, index) => groups[index] === group)) return undefined;
  return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join(".");
}
