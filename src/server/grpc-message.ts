import type { OutgoingHttpHeaders } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

/**
 * Makes a gRPC response's `grpc-message` trailer encoded as the gRPC spec asks, whichever path writes it
 * (connect-node's handler or the fast unary path): connect-es percent-encodes every character that
 * encodeURIComponent does, and grpc-js decodes with decodeURI, which leaves "%3A" and the like as they are, so
 * its users read "token%3A …". Only bytes outside printable ASCII, and "%", are encoded here; every gRPC client
 * decodes that alike.
 */
export function encodingGrpcMessages(request: NodeRequest, response: NodeResponse): void {
  if (!("stream" in request) || !String(request.headers["content-type"] ?? "").startsWith("application/grpc")) return;
  if (String(request.headers["content-type"]).startsWith("application/grpc-web")) return;
  const http2 = response as Http2ServerResponse;
  const addTrailers = http2.addTrailers.bind(http2);
  http2.addTrailers = (trailers: OutgoingHttpHeaders) => {
    const message = trailers["grpc-message"];
    if (typeof message === "string") trailers["grpc-message"] = grpcMessageText(decodedOrAsIs(message));
    addTrailers(trailers);
  };
}

/** `message` as the gRPC spec percent-encodes it: UTF-8, bytes outside printable ASCII and "%" encoded. */
export function grpcMessageText(message: string): string {
  let text = "";
  for (const byte of Buffer.from(message, "utf8")) {
    const printable = byte >= 0x20 && byte <= 0x7e && byte !== 0x25;
    text += printable ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return text;
}

function decodedOrAsIs(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
