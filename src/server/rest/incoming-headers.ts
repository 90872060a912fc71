import type { IncomingHttpHeaders } from "node:http";

/** Request headers that describe the HTTP exchange itself and are not passed on to the RPC. */
const HOP_HEADERS = new Set([
  "connection",
  "content-length",
  "content-type",
  "host",
  "keep-alive",
  "te",
  "transfer-encoding",
  "upgrade",
  "accept-encoding",
  "content-encoding",
  "expect",
]);
/** Protocol headers of Connect and gRPC (timeouts, encodings): a REST caller's are not passed on. */
const RPC_PROTOCOL_HEADER = /^(connect|grpc)-/;

function passedOn(name: string): boolean {
  return !name.startsWith(":") && !HOP_HEADERS.has(name) && !RPC_PROTOCOL_HEADER.test(name);
}

/**
 * A read-only `Headers` over Node's parsed request headers, for the in-process call: interceptors and
 * implementations only read request headers, and copying them into a fetch `Headers` on every request is a
 * cost a profile shows. Writing methods throw.
 */
class IncomingHeaders {
  constructor(private readonly headers: IncomingHttpHeaders) {}

  get(name: string): string | null {
    const key = name.toLowerCase();
    if (!passedOn(key)) return null;
    const value = this.headers[key];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }

  has(name: string): boolean {
    return this.get(name) !== null;
  }

  getSetCookie(): string[] {
    return [];
  }

  *entries(): IterableIterator<[string, string]> {
    for (const name of Object.keys(this.headers).sort()) {
      const value = this.get(name);
      if (value !== null) yield [name, value];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  forEach(callback: (value: string, name: string, parent: Headers) => void): void {
    for (const [name, value] of this.entries()) callback(value, name, this as unknown as Headers);
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  append(): never {
    throw new TypeError("request headers are read-only");
  }

  set(): never {
    throw new TypeError("request headers are read-only");
  }

  delete(): never {
    throw new TypeError("request headers are read-only");
  }
}

/** The request's headers as the RPC sees them: hop-by-hop and Connect/gRPC protocol headers left out. */
export function incomingHeaders(headers: IncomingHttpHeaders): Headers {
  return new IncomingHeaders(headers) as unknown as Headers;
}
