import type { OutgoingHttpHeaders } from "node:http";
import {
  codeToHttpStatus,
  contentTypeUnaryJson,
  contentTypeUnaryProto,
  errorToJsonBytes,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import type { NodeResponse } from "./rest/rest-handler.js";
import {
  addHeaders,
  headerOf,
  type Negotiated,
  negotiateTerms,
  responseGone,
  type UnaryProtocol,
} from "./rpc-fast-protocol.js";
import { endAtTurnEnd } from "./turn-end-writes.js";

const TERM_HEADERS = {
  encoding: "content-encoding",
  timeout: "connect-timeout-ms",
  acceptEncoding: "accept-encoding",
  acceptEncodingName: "Accept-Encoding",
};

/**
 * Connect unary calls by POST, uncompressed, as connect-node answers them (see its protocol-connect
 * handler-factory): the message as the body, metadata as headers, trailers as `trailer-` headers, errors as a
 * JSON error body with the HTTP status of the code; the body compressed when the client accepts it and it is
 * at least `compressMinBytes` long.
 */
export const connectUnary: UnaryProtocol = {
  name: "connect",

  negotiate(request, settings) {
    if (request.method !== "POST") return undefined;
    const version = headerOf(request, "connect-protocol-version");
    if (version !== null && version !== "1") return undefined;
    const type = parseContentType(headerOf(request, "content-type"));
    return negotiateTerms(
      request,
      settings,
      type && !type.stream ? type.binary : undefined,
      TERM_HEADERS,
      parseTimeout,
    );
  },

  messageOf(body, negotiated) {
    return { data: body, compressed: negotiated.requestCompression !== null };
  },

  async answer(response, negotiated, output, metadata, settings) {
    const headers: OutgoingHttpHeaders = {
      "content-type": negotiated.binary ? contentTypeUnaryProto : contentTypeUnaryJson,
    };
    addHeaders(headers, metadata.header);
    await send(response, 200, headers, output, negotiated, metadata.trailer, settings.compressMinBytes);
  },

  async answerError(response, negotiated, error, metadata, settings) {
    const header = new Headers(metadata.header);
    header.set("content-type", contentTypeUnaryJson);
    for (const [name, value] of error.metadata) header.set(name, value);
    const headers: OutgoingHttpHeaders = {};
    addHeaders(headers, header);
    const body = errorToJsonBytes(error, settings.jsonOptions);
    await send(
      response,
      codeToHttpStatus(error.code),
      headers,
      body,
      negotiated,
      metadata.trailer,
      settings.compressMinBytes,
    );
  },
};

async function send(
  response: NodeResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  body: Uint8Array,
  { compression }: Negotiated,
  trailer: Headers | undefined,
  compressMinBytes: number,
): Promise<void> {
  let sent = body;
  if (compression && body.byteLength >= compressMinBytes) {
    sent = await compression.compress(body);
    headers["content-encoding"] = compression.name;
  }
  addHeaders(headers, trailer, "trailer-");
  headers["content-length"] = sent.byteLength;
  if (responseGone(response)) return;
  response.writeHead(status, headers);
  endAtTurnEnd(response, sent);
}
