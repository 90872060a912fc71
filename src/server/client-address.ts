import type { IncomingMessage } from "node:http";
import net from "node:net";
import { createContextKey } from "@connectrpc/connect";
import proxyaddr from "proxy-addr";
import type { ProxyTrust } from "../platform/config.js";
import type { NodeRequest } from "./rest/rest-handler.js";

const clientAddresses = new WeakMap<NodeRequest, string>();
const UNKNOWN = "unknown";

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
  if (!address) return UNKNOWN;
  if (!trusted || forwardedFor === undefined) return address;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor;
  const hops = proxyaddr.all(
    { socket: { remoteAddress: address }, headers: { "x-forwarded-for": header } } as unknown as IncomingMessage,
    trusted,
  );
  return canonical(hops[hops.length - 1]) ?? canonical(hops[hops.length - 2]) ?? address;
}

/**
 * Resolves the client's address as the request arrives: its connection's peer (read once a connection), or,
 * when the peer is a trusted proxy, what X-Forwarded-For says (see resolveClientAddress).
 */
export function recordClientAddress(request: NodeRequest, trusted: ProxyTrust | undefined): void {
  const peer = peerAddressOf(request);
  const forwardedFor = request.headers["x-forwarded-for"];
  if (!trusted || forwardedFor === undefined || peer === UNKNOWN) return;
  clientAddresses.set(request, resolveClientAddress(peer, forwardedFor, trusted));
}

/** The client's address as the server resolved it when the request arrived. */
export function clientAddressOf(request: NodeRequest): string {
  return clientAddresses.get(request) ?? peerAddressOf(request);
}

/** Each connection's peer address, canonical; keyed by the request's socket (HTTP/2: a proxy per stream). */
const peerAddresses = new WeakMap<object, string>();

function peerAddressOf(request: NodeRequest): string {
  const socket = request.socket;
  if (!socket) return UNKNOWN;
  let address = peerAddresses.get(socket);
  if (address === undefined) {
    address = canonical(socket.remoteAddress) ?? UNKNOWN;
    peerAddresses.set(socket, address);
  }
  return address;
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
