import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createConnectRouter,
  createContextValues,
} from "@connectrpc/connect";
import { type UniversalHandler, validateUniversalHandlerOptions } from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { Logger } from "../platform/logger.js";
import { clientAddressKey, clientAddressOf } from "./client-address.js";
import { connectUnary } from "./connect-unary.js";
import { grpcUnary } from "./grpc-unary.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";
import { type ReadBody, readBody, replayBody } from "./rpc-body.js";
import { answeringClientMistakes } from "./rpc-client-mistakes.js";
import { createFastPath, type HandOver, type InProcessInvoker } from "./rpc-fast-path.js";
import type { FastPathSettings, UnaryProtocol } from "./rpc-fast-protocol.js";
import { emptyBodyFor, screenedBytes, screenedRefusal, screenRefusalKey } from "./rpc-screen.js";
import { discardUnreadBody } from "./unread-body.js";

export interface RpcHandlerOptions extends ConnectRouterOptions {
  routes: (router: ConnectRouter) => void;
  /** Answers paths that name no procedure. */
  fallback: (request: NodeRequest, response: NodeResponse) => void;
  logger: Logger;
  /**
   * Calls unary implementations in process, through the same interceptors (see in-process-rpc.ts): the common
   * Connect and gRPC unary call is then answered without connect-node's handler pipeline. Without it, every
   * call goes through connect-node.
   */
  invoke?: InProcessInvoker;
}

/**
 * Connect, gRPC and gRPC-Web for Node's HTTP servers: connect-node's adapter, with each procedure's handler
 * wrapped so that client mistakes are never `internal` and every error has a body; the common unary call is
 * answered by the fast path (rpc-fast-path.ts) in the same words.
 */
export function createRpcHandler(options: RpcHandlerOptions): (request: NodeRequest, response: NodeResponse) => void {
  const routerOptions = { acceptCompression: [compressionGzip, compressionBrotli], ...options };
  const router = createConnectRouter(routerOptions);
  options.routes(router);
  const handlers = new Map<string, UniversalHandler>(
    router.handlers.map((handler) => [handler.requestPath, answeringClientMistakes(handler)]),
  );
  const settings = options.invoke ? validateUniversalHandlerOptions(routerOptions) : undefined;
  const serveFast =
    options.invoke && settings
      ? createFastPath({ invoke: options.invoke, settings, protocols: fastProtocols(options), logger: options.logger })
      : undefined;

  return (request, response) => {
    const target = request.url ?? "";
    const query = target.indexOf("?");
    const handler = handlers.get(query < 0 ? target : target.slice(0, query));
    if (!handler) {
      options.fallback(request, response);
      return;
    }
    if (!settings) {
      serveWithConnect(handler, request, response);
      return;
    }
    const handOver: HandOver = (body) => void screenThenServe(handler, request, response, settings, body);
    if (!serveFast?.(request, response, handler.method, handOver)) handOver();
  };

  /**
   * Hands the call to connect-node once what it would decode is checked on its encoded bytes (rpc-screen.ts);
   * a refused call reaches it with an empty message in place of its body, and the refusal, which the first
   * interceptor answers in the call's own protocol.
   */
  async function screenThenServe(
    handler: UniversalHandler,
    request: NodeRequest,
    response: NodeResponse,
    settings: FastPathSettings,
    read?: ReadBody,
  ): Promise<void> {
    if (!read && Number(request.headers["content-length"]) > settings.readMaxBytes) {
      serveWithConnect(handler, request, response); // refused for its declared length, before it is read
      return;
    }
    const body = read ?? (await readBody(request, screenedBytes(settings.readMaxBytes)));
    if (!body) return;
    const refusal = body.complete ? await screenedRefusal(handler.method, request, body.bytes, settings) : undefined;
    if (refusal) {
      const empty = { complete: true as const, bytes: Buffer.from(emptyBodyFor(request)) };
      serveWithConnect(handler, request, response, replayBody(empty, request), refusal);
    } else serveWithConnect(handler, request, response, replayBody(body, request));
  }

  function serveWithConnect(
    handler: UniversalHandler,
    request: NodeRequest,
    response: NodeResponse,
    body?: AsyncIterable<Uint8Array>,
    refusal?: Error,
  ): void {
    const contextValues = createContextValues().set(clientAddressKey, clientAddressOf(request));
    if (refusal) contextValues.set(screenRefusalKey, refusal);
    const universal = universalRequestFromNodeRequest(request, response, undefined, contextValues);
    handler(body ? { ...universal, body } : universal)
      .then((answer) => {
        // connect-node may answer (a body over the limit) with the body unread: HTTP/1.1 would then never
        // reach the connection's next request.
        discardUnreadBody(request, response);
        return universalResponseToNodeResponse(answer, response);
      })
      .catch((reason: unknown) => {
        if (ConnectError.from(reason).code === Code.Aborted) return;
        options.logger.error(
          { err: reason, requestId: request.headers["x-request-id"], procedure: handler.method.name },
          "RPC handler failed",
        );
      });
  }
}

/** The protocols the router serves that the fast path knows (gRPC-Web it leaves to connect-node). */
function fastProtocols(options: ConnectRouterOptions): UnaryProtocol[] {
  const protocols: UnaryProtocol[] = [];
  if (options.grpc !== false) protocols.push(grpcUnary);
  if (options.connect !== false) protocols.push(connectUnary);
  return protocols;
}
