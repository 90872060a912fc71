import type { OutgoingHttpHeaders } from "node:http";
import type { ConnectError } from "@connectrpc/connect";
import { type Compression, compressionNegotiate, type UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import type { ResponseMetadata } from "./in-process-rpc.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

/** connect-node's handler options (with its defaults filled in), which the fast path answers by. */
export type FastPathSettings = UniversalHandlerOptions;

/** What one request asked for, as connect-node would read it. */
export interface Negotiated {
  /** Binary protobuf; JSON otherwise. */
  binary: boolean;
  /** The client's deadline, in milliseconds from now. */
  timeoutMs?: number;
  /** How the response is compressed, when the client accepts a compression connect-node offers. */
  compression: Compression | null;
  /** How the request is compressed (its `content-encoding` or `grpc-encoding`); null when it is not. */
  requestCompression: Compression | null;
}

/** The message a request body carries, as sent: compressed or not. */
export interface BodyMessage {
  data: Uint8Array;
  compressed: boolean;
  /** More bytes follow it: the body is not one message (connect-node answers it, once its caps are checked). */
  trailing?: boolean;
}

/** One protocol's unary calls, answered the way connect-node answers them. */
export interface UnaryProtocol {
  name: "connect" | "grpc";
  /**
   * The request's terms when it is a call the fast path answers byte for byte as connect-node would; undefined
   * for anything else (another protocol, compression, a header connect-node would refuse...).
   */
  negotiate(request: NodeRequest, settings: FastPathSettings): Negotiated | undefined;
  /** The (first) message a body carries, compressed only as negotiated; undefined when there is none. */
  messageOf(body: Buffer, negotiated: Negotiated): BodyMessage | undefined;
  answer(
    response: NodeResponse,
    negotiated: Negotiated,
    output: Uint8Array,
    metadata: ResponseMetadata,
    settings: FastPathSettings,
  ): Promise<void>;
  answerError(
    response: NodeResponse,
    negotiated: Negotiated,
    error: ConnectError,
    metadata: ResponseMetadata,
    settings: FastPathSettings,
  ): Promise<void>;
}

/** The headers in which a protocol names its request encoding, deadline and accepted response encodings. */
export interface TermHeaders {
  encoding: string;
  timeout: string;
  acceptEncoding: string;
  /** How connect-node names the accept header in its errors. */
  acceptEncodingName: string;
}

/**
 * The terms of a request whose content type the protocol parsed (`binary`, or undefined when it is not the
 * protocol's), as connect-node reads them; undefined when it is compressed in an encoding connect-node does not
 * offer or its deadline does not parse (connect-node answers those).
 */
export function negotiateTerms(
  request: NodeRequest,
  settings: FastPathSettings,
  binary: boolean | undefined,
  headers: TermHeaders,
  parseTimeout: (value: string | null, maxTimeoutMs: number) => { timeoutMs?: number; error?: unknown },
): Negotiated | undefined {
  if (binary === undefined) return undefined;
  const encoding = headerOf(request, headers.encoding);
  const timeout = parseTimeout(headerOf(request, headers.timeout), settings.maxTimeoutMs);
  if (timeout.error) return undefined;
  const negotiated = compressionNegotiate(
    settings.acceptCompression,
    encoding,
    headerOf(request, headers.acceptEncoding),
    headers.acceptEncodingName,
  );
  if (negotiated.error) return undefined;
  return {
    binary,
    timeoutMs: timeout.timeoutMs,
    compression: negotiated.response,
    requestCompression: negotiated.request,
  };
}

/** A request header as one string (Node gives repeated ones as arrays, save a few it keeps once), or null. */
export function headerOf(request: NodeRequest, name: string): string | null {
  const value = request.headers[name];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}

/** Adds `headers` to Node's outgoing headers as connect-node does (a repeated name becomes an array). */
export function addHeaders(target: OutgoingHttpHeaders, headers: Headers | undefined, prefix = ""): void {
  headers?.forEach((value, name) => {
    const key = prefix + name;
    const existing = target[key];
    if (existing === undefined) target[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else target[key] = [String(existing), value];
  });
}

/** Whether the response can no longer be sent: the client closed the connection or reset the stream. */
export function responseGone(response: NodeResponse): boolean {
  return "stream" in response ? response.stream.destroyed : response.destroyed;
}
