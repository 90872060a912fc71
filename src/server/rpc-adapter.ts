import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createConnectRouter,
} from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { Logger } from "../platform/logger.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";
import { answeringClientMistakes } from "./rpc-client-mistakes.js";

export interface RpcHandlerOptions extends ConnectRouterOptions {
  routes: (router: ConnectRouter) => void;
  /** Answers paths that name no procedure. */
  fallback: (request: NodeRequest, response: NodeResponse) => void;
  logger: Logger;
}

/**
 * Connect, gRPC and gRPC-Web for Node's HTTP servers: connect-node's adapter, with each procedure's handler
 * wrapped so that client mistakes are never `internal` and every error has a body.
 */
export function createRpcHandler(options: RpcHandlerOptions): (request: NodeRequest, response: NodeResponse) => void {
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], ...options });
  options.routes(router);
  const handlers = new Map<string, UniversalHandler>(
    router.handlers.map((handler) => [handler.requestPath, answeringClientMistakes(handler)]),
  );
  return (request, response) => {
    const target = request.url ?? "";
    const query = target.indexOf("?");
    const handler = handlers.get(query < 0 ? target : target.slice(0, query));
    if (!handler) {
      options.fallback(request, response);
      return;
    }
    handler(universalRequestFromNodeRequest(request, response, undefined, undefined))
      .then((answer) => universalResponseToNodeResponse(answer, response))
      .catch((reason: unknown) => {
        if (ConnectError.from(reason).code === Code.Aborted) return;
        options.logger.error(
          { err: reason, requestId: request.headers["x-request-id"], procedure: handler.method.name },
          "RPC handler failed",
        );
      });
  };
}
