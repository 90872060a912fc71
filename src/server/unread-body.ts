import { constants as http2 } from "node:http2";
import { awaitsContinue, forgoContinue } from "./expect-continue.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

/** The most of an unread request body read and thrown away to keep its connection; past it, it is closed. */
const DISCARD_LIMIT_BYTES = 1024 * 1024;

/**
 * Call before answering a request whose body may not have been read to its end (an early 4xx). HTTP/1.1 parses
 * the next request on the connection only after this body, so the rest of it is read and thrown away: a body
 * declared no longer than 1 MiB keeps the connection; a longer one, or one of unknown length (chunked), is
 * answered with `Connection: close`; a sender that goes on past 1 MiB is cut off. On HTTP/2 only the stream
 * is at stake: it is read on, and cancelled past 1 MiB. A client still waiting for `100 Continue` is not sent it;
 * on HTTP/1.1 it has sent no body, and its connection is closed after the answer.
 */
export function discardUnreadBody(request: NodeRequest, response: NodeResponse): void {
  if (request.complete || !mayHaveBody(request)) return;
  const http1 = !("stream" in request);
  if (awaitsContinue(request)) {
    forgoContinue(request);
    // The client sends no body until told to: on HTTP/1.1 there is none to discard, and the connection cannot be
    // reused; on HTTP/2 the stream is read on as below.
    if (http1) {
      if (!response.headersSent) response.setHeader("Connection", "close");
      return;
    }
  }
  if (http1 && !declaredWithin(request, DISCARD_LIMIT_BYTES) && !response.headersSent) {
    response.setHeader("Connection", "close");
  }
  let discarded = 0;
  request.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded <= DISCARD_LIMIT_BYTES) return;
    if ("stream" in request) request.stream.close(http2.NGHTTP2_CANCEL);
    else request.socket.destroy();
  });
  request.resume();
}

/** False for a request that says it has no body (most GETs), whose `complete` turns true only once read. */
function mayHaveBody(request: NodeRequest): boolean {
  if ("stream" in request) return !request.stream.endAfterHeaders;
  const length = request.headers["content-length"];
  return request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

function declaredWithin(request: NodeRequest, limit: number): boolean {
  const declared = request.headers["content-length"];
  return declared !== undefined && /^\d+$/.test(declared) && Number(declared) <= limit;
}
