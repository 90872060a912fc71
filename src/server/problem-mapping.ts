import { Code } from "@connectrpc/connect";
import type { ProblemKind } from "../platform/errors.js";

export const PROBLEM_TYPE_PREFIX = "urn:provision:problem:";

interface Mapping {
  code: Code;
  status: number;
  title: string;
}

/** The one table from domain error kind to gRPC/Connect code and HTTP status. */
export const PROBLEM_MAPPINGS: Record<ProblemKind, Mapping> = {
  "invalid-argument": { code: Code.InvalidArgument, status: 400, title: "Bad Request" },
  unauthenticated: { code: Code.Unauthenticated, status: 401, title: "Unauthorized" },
  "permission-denied": { code: Code.PermissionDenied, status: 403, title: "Forbidden" },
  "not-found": { code: Code.NotFound, status: 404, title: "Not Found" },
  conflict: { code: Code.AlreadyExists, status: 409, title: "Conflict" },
  "failed-precondition": { code: Code.FailedPrecondition, status: 409, title: "Conflict" },
  "rate-limited": { code: Code.ResourceExhausted, status: 429, title: "Too Many Requests" },
  "too-large": { code: Code.ResourceExhausted, status: 413, title: "Content Too Large" },
  internal: { code: Code.Internal, status: 500, title: "Internal Server Error" },
  unimplemented: { code: Code.Unimplemented, status: 501, title: "Not Implemented" },
  unavailable: { code: Code.Unavailable, status: 503, title: "Service Unavailable" },
};

/** HTTP status for a gRPC/Connect code, for errors that did not start as domain errors. */
const STATUS_BY_CODE: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 409,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

export function httpStatusOf(code: Code): number {
  return STATUS_BY_CODE[code] ?? 500;
}

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  417: "Expectation Failed",
  431: "Request Header Fields Too Large",
  429: "Too Many Requests",
  499: "Client Closed Request",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export function titleOf(status: number): string {
  return TITLES[status] ?? "Error";
}

const SLUG_BY_CODE: Partial<Record<Code, string>> = {
  [Code.InvalidArgument]: "invalid-argument",
  [Code.NotFound]: "not-found",
  [Code.AlreadyExists]: "conflict",
  [Code.Aborted]: "conflict",
  [Code.OutOfRange]: "invalid-argument",
  [Code.Canceled]: "canceled",
  [Code.PermissionDenied]: "permission-denied",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.ResourceExhausted]: "rate-limited",
  [Code.FailedPrecondition]: "failed-precondition",
  [Code.Unimplemented]: "unimplemented",
  [Code.Unavailable]: "unavailable",
  [Code.DeadlineExceeded]: "timeout",
};

export function slugOf(code: Code): string {
  return SLUG_BY_CODE[code] ?? "internal";
}
