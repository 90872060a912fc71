import type { OutgoingHttpHeaders } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { encodeEnvelope, envelopeCompress } from "@connectrpc/connect/protocol";
import {
  contentTypeJson,
  contentTypeProto,
  grpcStatusOk,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { decodeEnvelope } from "./grpc-envelope.js";
import type { NodeResponse } from "./rest/rest-handler.js";
import {
  addHeaders,
  headerOf,
  type Negotiated,
  negotiateTerms,
  responseGone,
  type UnaryProtocol,
} from "./rpc-fast-protocol.js";

const TERM_HEADERS = {
  encoding: "grpc-encoding",
  timeout: "grpc-timeout",
  acceptEncoding: "grpc-accept-encoding",
  acceptEncodingName: "Grpc-Accept-Encoding",
};

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
    return negotiateTerms(request, settings, type?.binary, TERM_HEADERS, parseTimeout);
  },

  messageOf(body, negotiated) {
    return decodeEnvelope(body, negotiated.requestCompression !== null);
  },

  async answer(response, negotiated, output, metadata, settings) {
    const envelope = await envelopeCompress(
      { flags: 0, data: output },
      negotiated.compression,
      settings.compressMinBytes,
    );
    const trailers: OutgoingHttpHeaders = { "grpc-status": grpcStatusOk };
    addHeaders(trailers, metadata.trailer);
    send(response, headersOf(negotiated, metadata.header), trailers, encodeEnvelope(envelope.flags, envelope.data));
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
