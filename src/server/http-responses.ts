import type { Socket } from "node:net";
import type { JsonValue } from "@bufbuild/protobuf";
import type { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import type { FieldViolation } from "../platform/errors.js";
import { httpStatusOf, PROBLEM_TYPE_PREFIX, slugOf, titleOf } from "./problem-mapping.js";
import type { NodeResponse } from "./rest/rest-handler.js";
import { endAtTurnEnd } from "./turn-end-writes.js";

export interface Problem {
  status: number;
  slug: string;
  detail: string;
  instance: string;
  title?: string;
  errors?: FieldViolation[];
  /** Extension members added to the problem record. */
  extensions?: Record<string, JsonValue>;
}

export function writeJson(response: NodeResponse, status: number, body: JsonValue): void {
  writeJsonText(response, status, JSON.stringify(body));
}

/**
 * Writes JSON already serialized. The body goes as a Buffer: Node sends a string body by joining it to the
 * header text first, which cost the hot paths (check-in, pre-allocation) measurably more per answer.
 */
export function writeJsonText(response: NodeResponse, status: number, text: string): void {
  const body = Buffer.from(text);
  response.statusCode = status;
  response.setHeader("Content-Type", "application/json; charset=utf-8");
  response.setHeader("Content-Length", body.length);
  endAtTurnEnd(response, body);
}

export const READ_METHODS = ["GET", "HEAD"] as const;

/** Answers 405 with `Allow` when the request's method is not one of `allowed`; whether it did. */
export function refusedMethod(
  request: { method?: string },
  response: NodeResponse,
  path: string,
  allowed: readonly string[],
): boolean {
  if (allowed.includes(request.method ?? "")) return false;
  response.setHeader("Allow", allowed.join(", "));
  writeProblem(response, {
    status: 405,
    slug: "method-not-allowed",
    detail: `${request.method} is not allowed here; allowed: ${allowed.join(", ")}`,
    instance: path,
  });
  return true;
}

/** Writes an RFC 9457 problem record. */
export function writeProblem(response: NodeResponse, problem: Problem): void {
  const body: Record<string, JsonValue> = {
    type: PROBLEM_TYPE_PREFIX + problem.slug,
    title: problem.title ?? titleOf(problem.status),
    status: problem.status,
    detail: problem.detail,
    instance: problem.instance,
    ...(problem.errors && problem.errors.length > 0
      ? { errors: problem.errors.map((violation) => ({ field: violation.field, message: violation.message })) }
      : {}),
    ...problem.extensions,
  };
  const requestId = response.getHeader("X-Request-Id");
  if (typeof requestId === "string") body.requestId = requestId;
  const text = JSON.stringify(body);
  response.statusCode = problem.status;
  response.setHeader("Content-Type", "application/problem+json");
  response.setHeader("Content-Length", Buffer.byteLength(text));
  response.end(text);
}

/** Writes a Connect protocol error (`{"code": ..., "message": ...}`): the error body on RPC paths. */
export function writeConnectError(response: NodeResponse, status: number, code: Code, message: string): void {
  const text = JSON.stringify({ code: codeToString(code), message });
  response.statusCode = status;
  response.setHeader("Content-Type", "application/json");
  response.setHeader("Content-Length", Buffer.byteLength(text));
  response.end(text);
}

/**
 * Writes a problem straight to a socket whose request could not be parsed, or was cut (no response object can
 * answer it), then closes the connection. `requestId`: the id of the request cut, when its handler gave it one.
 */
export function writeRawProblem(socket: Socket, status: number, slug: string, detail: string, requestId?: string) {
  const problem = { type: PROBLEM_TYPE_PREFIX + slug, title: titleOf(status), status, detail };
  const text = JSON.stringify(requestId ? { ...problem, requestId } : problem);
  const idHeader = requestId ? `X-Request-Id: ${requestId}\r\n` : "";
  socket.end(
    `HTTP/1.1 ${status} ${titleOf(status)}\r\nContent-Type: application/problem+json\r\n${idHeader}` +
      `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

/** Headers an error carries to the HTTP response (authentication challenges, back-off hints). */
const ERROR_HEADERS = ["www-authenticate", "retry-after"];

/** Writes an RPC's failure as a problem record, with the headers it carries. */
export function writeErrorProblem(response: NodeResponse, error: ConnectError, instance: string): void {
  for (const name of ERROR_HEADERS) {
    const value = error.metadata.get(name);
    if (value) response.setHeader(name, value);
  }
  writeProblem(response, problemFromConnectError(error, instance));
}

export function problemFromConnectError(error: ConnectError, instance: string): Problem {
  const status = httpStatusOf(error.code);
  const details = error.findDetails(ProblemDetailsSchema)[0];
  const slug = details?.type.startsWith(PROBLEM_TYPE_PREFIX)
    ? details.type.slice(PROBLEM_TYPE_PREFIX.length)
    : slugOf(error.code);
  return {
    status,
    slug,
    title: details?.title || titleOf(status),
    detail: error.rawMessage,
    instance,
    errors: details?.errors.map((violation) => ({ field: violation.field, message: violation.message })),
  };
}
