import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

/** Requests that asked for `100 Continue` and have not been sent it. */
const awaiting = new WeakSet<NodeRequest>();

/**
 * Answers `Expect: 100-continue` when the body is first read, not when the headers arrive (Node's default): a
 * request refused before its body is read (401, 403, 404, 413, 415…) gets its answer without the client uploading
 * the body first. The first read of the stream (a listener, `resume`, `read`) sends the 100, unless an answer went.
 */
export function continueOnFirstRead(request: NodeRequest, response: NodeResponse): void {
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
