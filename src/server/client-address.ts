import type { IncomingMessage } from "node:http";
import net from "node:net";
import { createContextKey } from "@connectrpc/connect";
import proxyaddr from "proxy-addr";
import type { ProxyTrust } from "../platform/config.js";
import type { NodeRequest } from "./rest/rest-handler.js";

const clientAddresses = new WeakMap<NodeRequest, string>();

/**
 * The address of the client behind `peer`: `peer` itself, or, while the hop in hand is a trusted proxy, the
 * next address of X-Forwarded-For read from the right (the left part is whatever the client wrote). An entry
 * that is no address ends the walk at the last proxy, which is then the client as far as we can tell.
 */
export function resolveClientAddress(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  trusted: ProxyTrust | undefined,
): string {
  const address = canonical(peer);
  if (!address) return "unknown";
  if (!trusted || forwardedFor === undefined) return address;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor;
  const hops = proxyaddr.all(
    { socket: { remoteAddress: address }, headers: { "x-forwarded-for": header } } as unknown as IncomingMessage,
    trusted,
  );
  return canonical(hops[hops.length - 1]) ?? canonical(hops[hops.length - 2]) ?? address;
}

export function recordClientAddress(request: NodeRequest, address: string): void {
  clientAddresses.set(request, address);
}

/** The client's address as the server resolved it when the request arrived. */
export function clientAddressOf(request: NodeRequest): string {
  return clientAddresses.get(request) ?? canonical(request.socket?.remoteAddress) ?? "unknown";
}

/** What rate limits count an address under: IPv6 by its /64, the network one subscriber usually holds. */
export function addressBucket(address: string): string {
  if (net.isIP(address) !== 6) return address;
  const groups = expandIpv6(address).slice(0, 4);
  return `${groups.join(":")}::/64`;
}

function canonical(address: string | undefined): string | undefined {
  if (!address || !net.isIP(address)) return undefined;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1] : address.toLowerCase();
}

function expandIpv6(address: string): string[] {
  const [head, tail = ""] = address.split("::");
  const part = (text: string) => (text ? text.split(":") : []);
  const [left, right] = [part(head), part(tail)];
  if (right.length > 0 && right[right.length - 1].includes(".")) {
    const [a, b, c, d] = right.pop()?.split(".").map(Number) ?? [];
    right.push(((a << 8) | b).toString(16), ((c << 8) | d).toString(16));
  }
  const missing = address.includes("::") ? 8 - left.length - right.length : 0;
  return [...left, ...Array(missing).fill("0"), ...right].map((group) => Number.parseInt(group, 16).toString(16));
}

/** The client's address in a call's context, for implementations that record it (license sessions). */
export const clientAddressKey = createContextKey<string>("unknown", { description: "client address" });
