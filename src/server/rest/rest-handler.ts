import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DescMethod, DescMethodUnary, JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ConnectError, type Transport } from "@connectrpc/connect";
import { DomainError } from "../../platform/errors.js";
import type { Logger } from "../../platform/logger.js";
import { toConnectError } from "../error-interceptor.js";
import { type Problem, problemFromConnectError, writeJson, writeProblem } from "../http-responses.js";
import { httpStatusOf } from "../problem-mapping.js";
import { decodeRequest, encodeResponse, fieldByJsonKey, jsonFromText } from "./json-codec.js";
import { parseJsonExactIntegers } from "./lossless-json.js";
import type { RestRoute, RouteTable } from "./route-table.js";

export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;

/** Headers an error carries to the HTTP response (authentication challenges, back-off hints). */
const ERROR_HEADERS = ["www-authenticate", "retry-after"];

const JSON_CONTENT_TYPES = new Set(["application/json", "application/json-patch+json"]);

/** Request headers that describe the HTTP exchange itself and are not passed on to the RPC. */
const HOP_HEADERS = new Set([
  "connection",
  "content-length",
  "content-type",
  "host",
  "keep-alive",
  "te",
  "transfer-encoding",
  "upgrade",
  "accept-encoding",
  "content-encoding",
  "expect",
]);
/** Protocol headers of Connect and gRPC (timeouts, encodings): a REST caller's are not passed on. */
const RPC_PROTOCOL_HEADER = /^(connect|grpc)-/;

export interface RestHandlerOptions {
  routes: RouteTable;
  /** Reaches the same service implementations and interceptors as Connect and gRPC. */
  transport: Transport;
  bodyLimitBytes: number;
  logger: Logger;
  /** Checks the caller before the body is read; the RPC's interceptors check again. */
  authorize: (method: DescMethod, headers: Headers) => Promise<unknown>;
}

/** Serves REST/JSON for every route of the table; answers problems for unknown paths and methods. */
export function createRestHandler(options: RestHandlerOptions) {
  const { routes, transport, bodyLimitBytes } = options;

  return async function handleRest(request: NodeRequest, response: NodeResponse, url: URL): Promise<void> {
    const instance = url.pathname;
    // HEAD is GET without the body, which Node leaves out of the response by itself.
    const method = request.method === "HEAD" ? "GET" : (request.method ?? "GET");
    const match = routes.match(method, url.pathname);
    if (match.kind === "not-found") {
      writeProblem(response, {
        status: 404,
        slug: "route-not-found",
        detail: `no route for ${url.pathname}`,
        instance,
      });
      return;
    }
    if (match.kind === "method-not-allowed") {
      const allowed = match.allowed.includes("GET") ? [...match.allowed, "HEAD"].sort() : match.allowed;
      response.setHeader("Allow", allowed.join(", "));
      writeProblem(response, {
        status: 405,
        slug: "method-not-allowed",
        detail: `${request.method} is not allowed here; allowed: ${allowed.join(", ")}`,
        instance,
      });
      return;
    }
    const { route, variables } = match;
    try {
      await options.authorize(route.rpc, forwardedHeaders(request));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      request.resume();
      writeError(response, toConnectError(error), instance);
      return;
    }
    const input = await readInput(request, route, url, variables, bodyLimitBytes);
    if ("problem" in input) {
      writeProblem(response, { ...input.problem, instance });
      return;
    }
    const decoded = decodeRequest(route.rpc.input, input.json);
    if ("violations" in decoded) {
      const violations = decoded.violations.map((violation) => ({
        ...violation,
        field: bodyRelative(route, violation.field),
      }));
      const fields = violations.map((violation) => `${violation.field || "body"} ${violation.message}`);
      writeProblem(response, {
        status: 400,
        slug: "validation",
        detail: `invalid request: ${fields.join("; ")}`,
        instance,
        errors: violations,
      });
      return;
    }
    const abort = new AbortController();
    response.once("close", () => abort.abort());
    try {
      const result = await transport.unary(
        route.rpc as DescMethodUnary,
        abort.signal,
        undefined,
        forwardedHeaders(request),
        decoded.message,
      );
      writeJson(response, 200, responseJson(route, result.message as never));
    } catch (error) {
      const connectError = ConnectError.from(error);
      if (httpStatusOf(connectError.code) >= 500 && ![501, 503].includes(httpStatusOf(connectError.code))) {
        options.logger.error({ err: { message: connectError.message, code: connectError.code } }, "REST call failed");
      }
      writeError(response, connectError, instance);
    }
  };
}

/** A body bound to one message field is that message: name its fields from there, as the domain does. */
function bodyRelative(route: RestRoute, field: string): string {
  const bodyField = route.rpc.input.fields.find((candidate) => candidate.name === route.body);
  if (bodyField?.fieldKind !== "message") return field;
  const prefix = `${bodyField.jsonName}.`;
  return field.startsWith(prefix) ? field.slice(prefix.length) : field;
}

function writeError(response: NodeResponse, error: ConnectError, instance: string): void {
  for (const name of ERROR_HEADERS) {
    const value = error.metadata.get(name);
    if (value) response.setHeader(name, value);
  }
  writeProblem(response, problemFromConnectError(error, instance));
}

function responseJson(route: RestRoute, message: Parameters<typeof encodeResponse>[1]): JsonValue {
  const json = encodeResponse(route.rpc.output, message) as JsonObject;
  if (!route.responseBody) return json;
  const field = route.rpc.output.fields.find((candidate) => candidate.name === route.responseBody);
  return field ? json[field.jsonName] : json;
}

type Input = { json: JsonObject } | { problem: Omit<Problem, "instance"> };

async function readInput(
  request: NodeRequest,
  route: RestRoute,
  url: URL,
  variables: Record<string, string>,
  bodyLimitBytes: number,
): Promise<Input> {
  const json: JsonObject = {};
  const input = route.rpc.input;
  if (route.body) {
    const body = await readBody(request, bodyLimitBytes);
    if ("problem" in body) return body;
    if (body.text !== undefined) {
      let parsed: JsonValue;
      try {
        parsed = parseJsonExactIntegers(body.text);
      } catch (error) {
        const reason = error instanceof Error ? error.message : "malformed";
        return { problem: { status: 400, slug: "malformed-json", detail: `the body is not valid JSON: ${reason}` } };
      }
      if (route.body === "*") {
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          return { problem: { status: 400, slug: "malformed-json", detail: "the body must be a JSON object" } };
        }
        Object.assign(json, parsed);
      } else {
        const field = input.fields.find((candidate) => candidate.name === route.body);
        if (field && parsed !== null) json[field.jsonName] = parsed;
      }
    }
  }
  if (route.body !== "*") {
    const bodyField = input.fields.find((candidate) => candidate.name === route.body);
    for (const key of new Set(url.searchParams.keys())) {
      const path = key.split(".");
      const field = fieldByJsonKey(input, path[0]);
      if (!field || field === bodyField || path.length > 1) continue;
      const values = url.searchParams.getAll(key).map((text) => jsonFromText(field, text));
      json[field.jsonName] = field.fieldKind === "list" ? values : values[values.length - 1];
    }
  }
  for (const [name, text] of Object.entries(variables)) {
    const field = input.fields.find((candidate) => candidate.name === name);
    if (field) json[field.jsonName] = jsonFromText(field, text);
  }
  return { json };
}

type Body = { text: string | undefined } | { problem: Omit<Problem, "instance"> };

async function readBody(request: NodeRequest, limit: number): Promise<Body> {
  const encoding = String(request.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
  if (encoding !== "identity") {
    request.resume();
    return {
      problem: {
        status: 415,
        slug: "unsupported-content-encoding",
        detail: `send the body uncompressed; content-encoding ${encoding} is not supported`,
      },
    };
  }
  const declared = Number(request.headers["content-length"] ?? Number.NaN);
  if (declared > limit) {
    request.resume();
    return { problem: { status: 413, slug: "body-too-large", detail: `the body exceeds ${limit} bytes` } };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      request.resume();
      return { problem: { status: 413, slug: "body-too-large", detail: `the body exceeds ${limit} bytes` } };
    }
    chunks.push(chunk);
  }
  if (size === 0) return { text: undefined };
  const mediaType = String(request.headers["content-type"] ?? "")
    .split(";")[0]
    .trim()
    .toLowerCase();
  if (!JSON_CONTENT_TYPES.has(mediaType)) {
    return {
      problem: {
        status: 415,
        slug: "unsupported-media-type",
        detail: `send the body as application/json or application/json-patch+json, not ${mediaType || "no content type"}`,
      },
    };
  }
  // TextDecoder drops a leading byte-order mark, which some Windows clients send.
  return { text: new TextDecoder().decode(Buffer.concat(chunks)) };
}

function forwardedHeaders(request: NodeRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (name.startsWith(":") || HOP_HEADERS.has(name) || RPC_PROTOCOL_HEADER.test(name) || value === undefined) {
      continue;
    }
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return headers;
}
