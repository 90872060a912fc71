import type { OutgoingHttpHeaders } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { compressionNegotiate } from "@connectrpc/connect/protocol";
import {
  contentTypeJson,
  contentTypeProto,
  grpcStatusOk,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { decodeEnvelope, encodeEnvelope } from "./grpc-envelope.js";
import type { NodeResponse } from "./rest/rest-handler.js";
import { addHeaders, headerOf, type Negotiated, responseGone, type UnaryProtocol } from "./rpc-fast-protocol.js";

/**
 * gRPC unary calls over HTTP/2, uncompressed, as connect-node answers them (see its protocol-grpc
 * handler-factory): headers (with `grpc-encoding` whenever the client accepts a compression connect-node
 * offers), the enveloped message (compressed when at least `compressMinBytes` long), then trailers with
 * `grpc-status`; an error is the headers, no message, and trailers with its status, message, details and
 * metadata.
 */
export const grpcUnary: UnaryProtocol = {
  name: "grpc",

  negotiate(request, settings) {
    if (!("stream" in request) || request.method !== "POST") return undefined;
    const type = parseContentType(headerOf(request, "content-type"));
    if (!type) return undefined;
    const encoding = headerOf(request, "grpc-encoding");
    if (encoding !== null && encoding !== "identity") return undefined;
    const timeout = parseTimeout(headerOf(request, "grpc-timeout"), settings.maxTimeoutMs);
    if (timeout.error) return undefined;
    const { response } = compressionNegotiate(
      settings.acceptCompression,
      encoding,
      headerOf(request, "grpc-accept-encoding"),
      "Grpc-Accept-Encoding",
    );
    return { binary: type.binary, timeoutMs: timeout.timeoutMs, compression: response };
  },

  messageOf: decodeEnvelope,

  async answer(response, negotiated, output, metadata, settings) {
    const { compression } = negotiated;
    const compressed = compression !== null && output.byteLength >= settings.compressMinBytes;
    const data = compressed ? await compression.compress(output) : output;
    const trailers: OutgoingHttpHeaders = { "grpc-status": grpcStatusOk };
    addHeaders(trailers, metadata.trailer);
    send(response, headersOf(negotiated, metadata.header), trailers, encodeEnvelope(compressed ? 1 : 0, data));
  },

  async answerError(response, negotiated, error, metadata) {
    const trailer = new Headers({ "grpc-status": grpcStatusOk });
    for (const [name, value] of metadata.trailer ?? []) trailer.append(name, value);
    setTrailerStatus(trailer, error);
    const trailers: OutgoingHttpHeaders = {};
    addHeaders(trailers, trailer);
    send(response, headersOf(negotiated, metadata.header), trailers, undefined);
  },
};

function headersOf({ binary, compression }: Negotiated, header: Headers | undefined): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { "content-type": binary ? contentTypeProto : contentTypeJson };
  if (compression) headers["grpc-encoding"] = compression.name;
  addHeaders(headers, header);
  return headers;
}

function send(
  response: NodeResponse,
  headers: OutgoingHttpHeaders,
  trailers: OutgoingHttpHeaders,
  body: Uint8Array | undefined,
): void {
  if (responseGone(response)) return;
  const http2 = response as Http2ServerResponse;
  http2.writeHead(200, headers);
  http2.addTrailers(trailers);
  if (body) http2.end(body);
  else http2.end();
}
