import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import type { AllowedOrigins } from "../platform/allowed-origins.js";
import { type Logger, requestLogOf } from "../platform/logger.js";
import { answerCors } from "./cors.js";
import { connectErrorOf } from "./error-interceptor.js";
import { encodingGrpcMessages } from "./grpc-message.js";
import { READ_METHODS, refusedMethod, writeConnectError, writeJson, writeProblem } from "./http-responses.js";
import { type RequestHandler, statusAnsweredOn } from "./http-server.js";
import { type RequestTarget, readTarget } from "./request-target.js";
import { answerError, type NodeRequest, type NodeResponse } from "./rest/rest-handler.js";
import { responseGone } from "./rpc-fast-protocol.js";
import { discardUnreadBody } from "./unread-body.js";

export interface RequestHandlerParts {
  logger: Logger;
  /** Connect, gRPC and gRPC-Web, for paths of the form `/package.Service/Method`. */
  rpc: (request: NodeRequest, response: NodeResponse) => void;
  rest: (request: NodeRequest, response: NodeResponse, target: RequestTarget) => Promise<void>;
  /** Handlers of exact paths outside the contract's services: the token endpoint, discovery documents. */
  endpoints: Record<string, (request: NodeRequest, response: NodeResponse) => Promise<void>>;
  /** Throws when a dependency the service needs is unreachable. */
  checkReadiness: () => Promise<void>;
  /** Origins whose browser scripts may call (CORS); unset = none. */
  corsOrigins?: AllowedOrigins;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const RPC_PATH = /^\/[A-Za-z_][\w.]*\.[A-Za-z_]\w*\/[A-Za-z_]\w*$/;
const PROBES = new Set(["/healthz", "/readyz"]);
const CLIENT_CLOSED_REQUEST = 499;
/** Node answers `Expect` values naming 100-continue itself; any other expectation reaches the handler. */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

interface Refusal {
  status: number;
  slug: string;
  detail: string;
  /** The connection cannot be trusted with another request. */
  close?: boolean;
}

/** What HTTP itself refuses before any route is looked at. */
function refusalOf(request: NodeRequest): Refusal | undefined {
  if (request.httpVersion === "1.1" && request.headers.host === undefined) {
    return {
      status: 400,
      slug: "malformed-request",
      detail: "an HTTP/1.1 request must carry a Host header",
      close: true,
    };
  }
  const expect = request.headers.expect;
  if (expect !== undefined && !CONTINUE.test(expect)) {
    return {
      status: 417,
      slug: "expectation-failed",
      detail: "the only expectation this service meets is 100-continue",
    };
  }
  return undefined;
}

/**
 * connect-node builds each request's URL from its authority and throws (out of the request listener, which
 * ends the process) when there is none: an HTTP/1.0 request may leave out Host. Such a request is addressed to
 * this server. (HTTP/2 without :authority or Host never gets this far: nghttp2 refuses the stream.)
 */
function ensureAuthority(request: NodeRequest): void {
  if (!("authority" in request) && request.headers.host === undefined) request.headers.host = "localhost";
}

/**
 * Gives every request an id, answers the health probes, and sends each request to RPC or REST. Answers what to
 * do when the response closes: write the request's log line.
 */
export function createRequestHandler(parts: RequestHandlerParts): RequestHandler {
  const logRequest = requestLogOf(parts.logger);
  return (request, response) => {
    const started = performance.now();
    const offered = request.headers["x-request-id"];
    const requestId = typeof offered === "string" && REQUEST_ID.test(offered) ? offered : randomUUID();
    request.headers["x-request-id"] = requestId;
    response.setHeader("X-Request-Id", requestId);
    const target = readTarget(request.url);
    if (!(parts.corsOrigins && answerCors(parts.corsOrigins, request, response))) {
      if (request.httpVersion === "2.0") dispatchUnlessReset(parts, request, response, target, requestId);
      else dispatch(parts, request, response, target, requestId);
    }
    return () =>
      logRequest({
        requestId,
        method: request.method,
        path: target?.path,
        // Nothing was sent when the connection closed first: the status the server cut it with (408), else 499,
        // the client closed the request.
        status: response.headersSent
          ? response.statusCode
          : (statusAnsweredOn(request.socket) ?? CLIENT_CLOSED_REQUEST),
        httpVersion: request.httpVersion,
        durationMs: performance.now() - started,
      });
  };
}

/**
 * An HTTP/2 stream's RST_STREAM sent with its HEADERS is read only after the request event, in the same turn:
 * dispatching on the next turn lets a rapid-reset flood's requests end there, before authentication or a query.
 */
function dispatchUnlessReset(
  parts: RequestHandlerParts,
  request: NodeRequest,
  response: NodeResponse,
  target: RequestTarget | undefined,
  requestId: string,
): void {
  setImmediate(() => {
    if (!responseGone(response)) dispatch(parts, request, response, target, requestId);
  });
}

function dispatch(
  parts: RequestHandlerParts,
  request: NodeRequest,
  response: NodeResponse,
  target: RequestTarget | undefined,
  requestId: string,
): void {
  const path = target?.path;
  if (!target || path === undefined) {
    writeProblem(response, {
      status: 400,
      slug: "malformed-request",
      detail: "the request target is not a path this service can read",
      instance: "",
    });
    return;
  }
  const isRpc = RPC_PATH.test(path);
  const refusal = refusalOf(request);
  if (refusal) {
    if (refusal.close) response.setHeader("Connection", "close");
    discardUnreadBody(request, response);
    if (isRpc) writeConnectError(response, refusal.status, Code.InvalidArgument, refusal.detail);
    else writeProblem(response, { status: refusal.status, slug: refusal.slug, detail: refusal.detail, instance: path });
    return;
  }
  if (PROBES.has(path)) {
    answerProbe(parts, request, response, path);
    return;
  }
  const fail = (error: unknown) => answerFailure(parts.logger, request, response, error, { requestId, path });
  const endpoint = Object.hasOwn(parts.endpoints, path) ? parts.endpoints[path] : undefined;
  if (endpoint) {
    endpoint(request, response).catch(fail);
    return;
  }
  if (isRpc) {
    ensureAuthority(request);
    encodingGrpcMessages(request, response);
    parts.rpc(request, response);
    return;
  }
  parts.rest(request, response, target).catch(fail);
}

function answerProbe(parts: RequestHandlerParts, request: NodeRequest, response: NodeResponse, path: string): void {
  if (refusedMethod(request, response, path, READ_METHODS)) return;
  if (path === "/healthz") {
    writeJson(response, 200, { status: "ok" });
    return;
  }
  parts.checkReadiness().then(
    () => writeJson(response, 200, { status: "ready" }),
    (error: Error) => writeProblem(response, { status: 503, slug: "not-ready", detail: error.message, instance: path }),
  );
}

function answerFailure(
  logger: Logger,
  request: NodeRequest,
  response: NodeResponse,
  error: unknown,
  where: { requestId: string; path: string },
): void {
  // Not request.destroyed: Node sets it once the body has been read to its end, with the client still waiting.
  if (!response.headersSent && responseGone(response)) {
    logger.debug({ ...where, reason: (error as Error)?.message }, "the client went away mid-request");
    return;
  }
  if (response.headersSent) {
    logger.error({ err: error, ...where }, "request handler failed");
    response.destroy();
    return;
  }
  const failure = connectErrorOf(error, logger, { requestId: where.requestId, procedure: where.path });
  answerError(request, response, failure, where.path);
}

/** Answers a path shaped like `/package.Service/Method` that names no method of the contract. */
export function answerUnknownRpc(request: NodeRequest, response: NodeResponse): void {
  const path = (request.url ?? "").split("?")[0];
  writeProblem(response, { status: 404, slug: "route-not-found", detail: `no route for ${path}`, instance: path });
}
