import type { DescMethod } from "@bufbuild/protobuf";
import { createContextKey } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { encodedMessage, encodedRefusal } from "./encoded-refusal.js";
import type { NodeRequest } from "./rest/rest-handler.js";

/** A call's body as connect-node will read it: its messages, where they are compressed, and how. */
interface Framing {
  binary: boolean;
  /** Enveloped messages (gRPC, gRPC-Web, Connect streaming); a Connect unary body is one bare message. */
  enveloped: boolean;
  /** gRPC-Web's text form: the body is base64. */
  base64: boolean;
  compression: Compression | null;
}

/** Enveloped messages connect-node decodes of a unary call before refusing a body of more: the first two. */
const MESSAGES_DECODED = 2;

/** The refusal a screened call carries to the first interceptor, which answers it. */
export const screenRefusalKey = createContextKey<Error | undefined>(undefined, { description: "screen refusal" });

/** How much of a call's body is read before connect-node has it: its first two messages, each at the limit. */
export function screenedBytes(readMaxBytes: number): number {
  return MESSAGES_DECODED * (readMaxBytes + 5);
}

/**
 * The refusal of a call connect-node would decode before any check of its caps (gRPC-Web, gRPC over HTTP/1.1,
 * a body of more than one message...): each message it would decode, checked on its encoded bytes as the fast
 * path checks its own (see encoded-refusal.ts). Undefined when none is over, or the body cannot be read as
 * the headers say (connect-node answers it).
 */
export async function screenedRefusal(
  method: DescMethod,
  request: NodeRequest,
  body: Uint8Array,
  settings: { acceptCompression: Compression[]; readMaxBytes: number },
): Promise<Error | undefined> {
  const framing = framingOf(request, settings.acceptCompression);
  if (!framing) return undefined;
  const bytes = framing.base64 ? Buffer.from(Buffer.from(body).toString("latin1"), "base64") : body;
  const messages = framing.enveloped
    ? envelopesOf(bytes).slice(0, MESSAGES_DECODED)
    : [{ data: bytes, compressed: framing.compression !== null }];
  for (const { data, compressed } of messages) {
    const decoded = compressed
      ? await framing.compression?.decompress(data, settings.readMaxBytes).catch(() => undefined)
      : data;
    if (!decoded) return undefined;
    const refusal = encodedRefusal(method, encodedMessage(framing.binary, decoded));
    if (refusal) return refusal;
  }
  return undefined;
}

/**
 * A body standing in for a refused one, which connect-node decodes at no cost (an empty message, framed as the
 * request's) so that the refusal is answered in the call's own protocol; the request's compression headers are
 * dropped with it.
 */
export function emptyBodyFor(request: NodeRequest): Uint8Array {
  const type = contentTypeOf(request);
  for (const header of ["content-encoding", "grpc-encoding", "connect-content-encoding"])
    delete request.headers[header];
  const enveloped = type.startsWith("application/grpc") || type.startsWith("application/connect+");
  const body = enveloped ? new Uint8Array(5) : Buffer.from(type.endsWith("json") ? "{}" : "");
  const framed = type.startsWith("application/grpc-web-text")
    ? Buffer.from(Buffer.from(body).toString("base64"))
    : body;
  request.headers["content-length"] = String(framed.length);
  return framed;
}

function framingOf(request: NodeRequest, available: Compression[]): Framing | undefined {
  const type = contentTypeOf(request);
  const binary = !type.endsWith("json");
  const connectStream = type.startsWith("application/connect+");
  const enveloped = type.startsWith("application/grpc") || connectStream;
  const encodingHeader = connectStream ? "connect-content-encoding" : enveloped ? "grpc-encoding" : "content-encoding";
  const encoding = headerText(request, encodingHeader);
  const compression =
    encoding === undefined || encoding === "identity"
      ? null
      : available.find((candidate) => candidate.name === encoding);
  if (compression === undefined) return undefined;
  return { binary, enveloped, base64: type.startsWith("application/grpc-web-text"), compression };
}

/** Every whole envelope's data, and whether it is flagged compressed (end-of-stream and trailer frames left out). */
function envelopesOf(bytes: Uint8Array): { data: Uint8Array; compressed: boolean }[] {
  const messages: { data: Uint8Array; compressed: boolean }[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + 5 <= bytes.length; ) {
    const flags = bytes[at];
    const end = at + 5 + view.getUint32(at + 1);
    if (end > bytes.length) break;
    if ((flags & 0x82) === 0) messages.push({ data: bytes.subarray(at + 5, end), compressed: (flags & 1) === 1 });
    at = end;
  }
  return messages;
}

function contentTypeOf(request: NodeRequest): string {
  return (headerText(request, "content-type") ?? "").split(";")[0].trim().toLowerCase();
}

function headerText(request: NodeRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}
