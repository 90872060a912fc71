import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DescMethod, JsonObject, Message } from "@bufbuild/protobuf";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import { authorizedCallerKey, type Caller } from "../../auth/auth-interceptor.js";
import { DomainError } from "../../platform/errors.js";
import type { Logger } from "../../platform/logger.js";
import { clientAddressKey, clientAddressOf } from "../client-address.js";
import { connectErrorOf, toConnectError } from "../error-interceptor.js";
import { type Problem, writeErrorProblem, writeJsonText, writeProblem } from "../http-responses.js";
import type { InProcessCall } from "../in-process-rpc.js";
import { httpStatusOf } from "../problem-mapping.js";
import { isBatchOverCap } from "../request-limits.js";
import { type RequestTarget, targetUrl } from "../request-target.js";
import { responseSignal } from "../response-signal.js";
import { discardUnreadBody } from "../unread-body.js";
import { decodeRequestInChunks, encodeResponseInChunks } from "./chunked-codec.js";
import type { FastAnswer, FastRoute } from "./fast-route.js";
import { incomingHeaders } from "./incoming-headers.js";
import { isEmptyBody, type RequestBody, readInput, readSmallBody } from "./rest-input.js";
import type { RestRoute, RouteTable } from "./route-table.js";

export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;

export interface RestHandlerOptions {
  routes: RouteTable;
  /** Calls the implementation through the interceptors Connect and gRPC run, in process. */
  invoke: (method: DescMethod, call: InProcessCall) => Promise<Message>;
  bodyLimitBytes: number;
  logger: Logger;
  /** Checks the caller before the body is read; the call's interceptors take the caller it returns. */
  authorize: (method: DescMethod, headers: Headers) => Promise<Caller>;
  /** Field violations of a request's JSON against the caps of its repeated fields, found before decoding. */
  checkLimits: (method: DescMethod, json: JsonObject) => { field: string; message: string }[];
  /** Routes whose everyday request is answered from memory (see fast-route.ts). */
  fastRoutes?: FastRoute[];
}

/** Serves REST/JSON for every route of the table; answers problems for unknown paths and methods. */
export function createRestHandler(options: RestHandlerOptions) {
  const { routes, bodyLimitBytes } = options;
  const fastRoutes = new Map((options.fastRoutes ?? []).map((fast) => [fast.method, fast]));

  return async function handleRest(request: NodeRequest, response: NodeResponse, target: RequestTarget): Promise<void> {
    const instance = target.path;
    // HEAD is GET without the body, which Node leaves out of the response by itself.
    const method = request.method === "HEAD" ? "GET" : (request.method ?? "GET");
    const match = routes.match(method, target.path);
    if (match.kind === "not-found") {
      answerProblem(request, response, {
        status: 404,
        slug: "route-not-found",
        detail: `no route for ${target.path}`,
        instance,
      });
      return;
    }
    if (match.kind === "method-not-allowed") {
      const allowed = match.allowed.includes("GET") ? [...match.allowed, "HEAD"].sort() : match.allowed;
      response.setHeader("Allow", allowed.join(", "));
      answerProblem(request, response, {
        status: 405,
        slug: "method-not-allowed",
        detail: `${request.method} is not allowed here; allowed: ${allowed.join(", ")}`,
        instance,
      });
      return;
    }
    const { route, variables } = match;
    const fast = fastRoutes.get(route.rpc);
    const usable = fast && (fast.readsQuery || !request.url?.includes("?"));
    const readFirst =
      usable && (await answerFast(fast, { request, response, route, variables, instance, logger: options.logger }));
    if (readFirst === true) return;
    const header = incomingHeaders(request.headers);
    let caller: Caller;
    try {
      caller = await options.authorize(route.rpc, header);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      answerError(request, response, toConnectError(error), instance);
      return;
    }
    const url = targetUrl(target, request.url);
    const input = await readInput(request, route, url, variables, bodyLimitBytes, readFirst || undefined);
    if ("problem" in input) {
      answerProblem(request, response, { ...input.problem, instance });
      return;
    }
    const tooMany = options.checkLimits(route.rpc, input.json);
    const decoded =
      tooMany.length > 0 ? { violations: tooMany } : await decodeRequestInChunks(route.rpc.input, input.json);
    if ("violations" in decoded) {
      answerViolations(response, route, decoded.violations, instance);
      return;
    }
    const contextValues = createContextValues()
      .set(authorizedCallerKey, caller)
      .set(clientAddressKey, clientAddressOf(request));
    try {
      const output = await options.invoke(route.rpc, {
        message: decoded.message,
        header,
        contextValues,
        signal: () => responseSignal(response),
        requestMethod: request.method ?? "GET",
        url: url.href,
      });
      writeJsonText(response, 200, await responseText(route, output));
    } catch (error) {
      const connectError = ConnectError.from(error);
      const status = httpStatusOf(connectError.code);
      if (status >= 500 && status !== 501 && status !== 503) {
        options.logger.error({ err: { message: connectError.message, code: connectError.code } }, "REST call failed");
      }
      writeErrorProblem(response, connectError, instance);
    }
  };
}

/**
 * Answers with the fast route when it recognises the caller, the body says nothing and it holds the answer:
 * true once answered. Otherwise the body it read, if it got that far, for the full pipeline.
 */
async function answerFast(
  fast: FastRoute,
  call: {
    request: NodeRequest;
    response: NodeResponse;
    route: RestRoute;
    variables: Record<string, string>;
    instance: string;
    logger: Logger;
  },
): Promise<true | RequestBody | undefined> {
  const { request, response, route, variables } = call;
  const caller = fast.caller(request.headers.authorization, variables);
  if (!caller) return undefined;
  const small = readSmallBody(request);
  if (!small) return undefined;
  const body = { bytes: small instanceof Promise ? await small : small };
  if (!isEmptyBody(request, body.bytes)) return body;
  const query = fast.readsQuery ? queryOf(request.url) : NO_QUERY;
  const ready = prepared(fast, caller, variables, query);
  const answer = ready instanceof Promise ? await ready : ready;
  if (!answer) return body;
  try {
    const message = answer();
    const text = responseText(route, message instanceof Promise ? await message : message);
    writeJsonText(response, 200, typeof text === "string" ? text : await text);
  } catch (error) {
    const where = { requestId: request.headers["x-request-id"], procedure: fast.method.name };
    writeErrorProblem(response, connectErrorOf(error, call.logger, where), call.instance);
  }
  return true;
}

/**
 * A fast route's answer, or undefined when it declines: a failure before the route is sure to answer is the full
 * pipeline's to answer, as it answers every failure. No wait when the route answers at once.
 */
function prepared(
  fast: FastRoute,
  caller: object,
  variables: Record<string, string>,
  query: URLSearchParams,
): FastAnswer | undefined | Promise<FastAnswer | undefined> {
  try {
    const ready = fast.prepare(caller, variables, query);
    return ready instanceof Promise ? ready.catch(() => undefined) : ready;
  } catch {
    return undefined;
  }
}

const NO_QUERY = new URLSearchParams();

function queryOf(url = ""): URLSearchParams {
  const start = url.indexOf("?");
  return new URLSearchParams(start < 0 ? "" : url.slice(start + 1));
}

function answerViolations(
  response: NodeResponse,
  route: RestRoute,
  found: { field: string; message: string }[],
  instance: string,
): void {
  const violations = found.map((violation) => ({ ...violation, field: bodyRelative(route, violation.field) }));
  const fields = violations.map((violation) => `${violation.field || "body"} ${violation.message}`);
  const tooLarge = isBatchOverCap(route.rpc, found);
  writeProblem(response, {
    status: tooLarge ? 413 : 400,
    slug: tooLarge ? "too-many-items" : "validation",
    detail: `${tooLarge ? "too many items in the batch" : "invalid request"}: ${fields.join("; ")}`,
    instance,
    errors: violations,
  });
}

/** Answers a problem, possibly before the body was read (see discardUnreadBody). */
function answerProblem(request: NodeRequest, response: NodeResponse, problem: Problem): void {
  discardUnreadBody(request, response);
  writeProblem(response, problem);
}

/** Answers a failure as a problem record, possibly before the body was read (see discardUnreadBody). */
export function answerError(request: NodeRequest, response: NodeResponse, error: ConnectError, instance: string): void {
  discardUnreadBody(request, response);
  writeErrorProblem(response, error, instance);
}

/** A body bound to one message field is that message: name its fields from there, as the domain does. */
function bodyRelative(route: RestRoute, field: string): string {
  const bodyField = route.rpc.input.fields.find((candidate) => candidate.name === route.body);
  if (bodyField?.fieldKind !== "message") return field;
  const prefix = `${bodyField.jsonName}.`;
  return field.startsWith(prefix) ? field.slice(prefix.length) : field;
}

function responseText(route: RestRoute, message: Message): string | Promise<string> {
  return encodeResponseInChunks(route.rpc.output, message, route.responseBody);
}
