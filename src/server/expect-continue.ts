import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

/** Requests that asked for `100 Continue` and have not been sent it. */
const awaiting = new WeakSet<NodeRequest>();

/**
 * Answers `Expect: 100-continue` when the body is first read, not when the headers arrive (Node's default): a
 * request refused before its body is read (401, 403, 404, 413, 415…) gets its answer without the client uploading
 * the body first. The first read of the stream (a listener, `resume`, `read`) sends the 100, unless an answer went
 * or `forgoContinue` was called. A request that declares no body is told to continue at once, as Node would.
 */
export function continueOnFirstRead(request: NodeRequest, response: NodeResponse): void {
  if (!declaresBody(request)) {
    response.writeContinue();
    return;
  }
  awaiting.add(request);
  const read = request._read;
  request._read = function readAfterContinue(size: number) {
    request._read = read;
    if (awaiting.delete(request) && !response.headersSent) response.writeContinue();
    return read.call(this, size);
  };
}

/** Whether the request's client still waits for `100 Continue` before it sends its body. */
export function awaitsContinue(request: NodeRequest): boolean {
  return awaiting.has(request);
}

/** The request is answered without its body: it is not told to continue. */
export function forgoContinue(request: NodeRequest): void {
  awaiting.delete(request);
}

function declaresBody(request: NodeRequest): boolean {
  if ("stream" in request) return !request.stream.endAfterHeaders;
  const length = request.headers["content-length"];
  return request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}
