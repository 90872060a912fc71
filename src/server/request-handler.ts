import { randomUUID } from "node:crypto";
import type { Logger } from "../platform/logger.js";
import { writeJson, writeProblem } from "./http-responses.js";
import type { RequestHandler } from "./http-server.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

export interface RequestHandlerParts {
  logger: Logger;
  /** Connect, gRPC and gRPC-Web, for paths of the form `/package.Service/Method`. */
  rpc: (request: NodeRequest, response: NodeResponse) => void;
  rest: (request: NodeRequest, response: NodeResponse, url: URL) => Promise<void>;
  /** Handlers of exact paths outside the contract's services: the token endpoint, discovery documents. */
  endpoints: Record<string, (request: NodeRequest, response: NodeResponse) => Promise<void>>;
  /** Throws when a dependency the service needs is unreachable. */
  checkReadiness: () => Promise<void>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const RPC_PATH = /^\/[A-Za-z_][\w.]*\.[A-Za-z_]\w*\/[A-Za-z_]\w*$/;
const PROBES = new Set(["/healthz", "/readyz"]);
const CLIENT_CLOSED_REQUEST = 499;

/** The request target as a URL; undefined for targets Node's parser lets through but WHATWG URL refuses. */
function requestUrl(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? "/", "http://service.invalid");
  } catch {
    return undefined;
  }
}

/** Gives every request an id, answers the health probes, and sends each request to RPC or REST. */
export function createRequestHandler(parts: RequestHandlerParts): RequestHandler {
  const { logger } = parts;
  return (request, response) => {
    const started = process.hrtime.bigint();
    const offered = request.headers["x-request-id"];
    const requestId = typeof offered === "string" && REQUEST_ID.test(offered) ? offered : randomUUID();
    request.headers["x-request-id"] = requestId;
    response.setHeader("X-Request-Id", requestId);
    const url = requestUrl(request.url);
    response.once("close", () => {
      logger.info(
        {
          requestId,
          method: request.method,
          path: url?.pathname,
          // Nothing was sent when the connection closed first: 499, the client closed the request.
          status: response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST,
          httpVersion: request.httpVersion,
          durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        },
        "request",
      );
    });

    if (!url) {
      writeProblem(response, {
        status: 400,
        slug: "malformed-request",
        detail: "the request target is not a path this service can read",
        instance: "",
      });
      return;
    }
    if (PROBES.has(url.pathname) && request.method !== "GET" && request.method !== "HEAD") {
      response.setHeader("Allow", "GET, HEAD");
      writeProblem(response, {
        status: 405,
        slug: "method-not-allowed",
        detail: `${request.method} is not allowed here; allowed: GET, HEAD`,
        instance: url.pathname,
      });
      return;
    }
    if (url.pathname === "/healthz") {
      writeJson(response, 200, { status: "ok" });
      return;
    }
    if (url.pathname === "/readyz") {
      parts.checkReadiness().then(
        () => writeJson(response, 200, { status: "ready" }),
        (error: Error) =>
          writeProblem(response, { status: 503, slug: "not-ready", detail: error.message, instance: url.pathname }),
      );
      return;
    }
    const endpoint = Object.hasOwn(parts.endpoints, url.pathname) ? parts.endpoints[url.pathname] : undefined;
    if (endpoint) {
      endpoint(request, response).catch((error: unknown) => fail(error));
      return;
    }
    if (RPC_PATH.test(url.pathname)) {
      parts.rpc(request, response);
      return;
    }
    parts.rest(request, response, url).catch((error: unknown) => fail(error));

    function fail(error: unknown): void {
      const path = url?.pathname ?? "";
      if (!response.headersSent && (request.destroyed || response.destroyed)) {
        logger.debug({ requestId, path, reason: (error as Error)?.message }, "the client went away mid-request");
        return;
      }
      logger.error({ err: error, requestId, path }, "request handler failed");
      if (!response.headersSent) {
        writeProblem(response, { status: 500, slug: "internal", detail: "internal error", instance: path });
      } else response.destroy();
    }
  };
}

/** Answers a path shaped like `/package.Service/Method` that names no method of the contract. */
export function answerUnknownRpc(request: NodeRequest, response: NodeResponse): void {
  const path = (request.url ?? "").split("?")[0];
  writeProblem(response, { status: 404, slug: "route-not-found", detail: `no route for ${path}`, instance: path });
}
