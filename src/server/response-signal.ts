import { Code, ConnectError } from "@connectrpc/connect";
import type { NodeResponse } from "./rest/rest-handler.js";
import { responseGone } from "./rpc-fast-protocol.js";

/**
 * Aborts when the response closes (sent, or the client went away) or, as connect-node's does, with
 * `deadline_exceeded` when the client's deadline (if any) passes. Made only when the implementation asks for it.
 */
export function responseSignal(response: NodeResponse, deadline?: number): AbortSignal {
  const controller = new AbortController();
  if (responseGone(response) || response.writableFinished) {
    controller.abort();
    return controller.signal;
  }
  let timer: NodeJS.Timeout | undefined;
  if (deadline !== undefined) {
    const expire = () => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
    const left = deadline - Date.now();
    if (left <= 0) expire();
    else timer = setTimeout(expire, left);
  }
  response.once("close", () => {
    clearTimeout(timer);
    controller.abort();
  });
  return controller.signal;
}
