import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import { DomainError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { databaseUnavailable, isDatabaseUnreachable } from "../platform/lost-connections.js";
import { warnThrottled } from "../platform/throttled-warnings.js";
import { PROBLEM_MAPPINGS, PROBLEM_TYPE_PREFIX } from "./problem-mapping.js";

/**
 * Turns domain errors into Connect errors carrying a ProblemDetails detail, the same for every protocol.
 * Anything unexpected is logged with the request id and answered as a bare `internal` error.
 */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (request) => {
    try {
      return await next(request);
    } catch (error) {
      throw connectErrorOf(error, logger, {
        requestId: request.header.get("x-request-id"),
        procedure: request.method.name,
      });
    }
  };
}

/** Where a failure happened, for its log line. */
export interface FailedCall {
  requestId: string | string[] | null | undefined;
  procedure: string;
}

/**
 * An RPC's failure as every protocol answers it: the database out of reach is 503 `database-unavailable` (logged
 * as a warning, at most once every few seconds); anything else unexpected is logged and becomes `internal`.
 */
export function connectErrorOf(error: unknown, logger: Logger, where: FailedCall): ConnectError {
  if (error instanceof DomainError) return toConnectError(error);
  if (error instanceof ConnectError) return error;
  if (isDatabaseUnreachable(error)) {
    warnUnreachable(logger, error, where);
    return toConnectError(databaseUnavailable());
  }
  logger.error({ err: error, ...where }, "unhandled error in RPC");
  return new ConnectError("internal error", Code.Internal);
}

/** One warning per interval while the database stays out of reach, counting the requests it failed meanwhile. */
function warnUnreachable(logger: Logger, error: unknown, where: FailedCall): void {
  const { message, code } = error as { message?: string; code?: string };
  warnThrottled(logger, { err: { message, code }, ...where }, "database unreachable: answering 503");
}

export function toConnectError(error: DomainError): ConnectError {
  const mapping = PROBLEM_MAPPINGS[error.kind];
  const details = create(ProblemDetailsSchema, {
    type: PROBLEM_TYPE_PREFIX + error.slug,
    title: mapping.title,
    errors: error.errors,
  });
  return new ConnectError(error.message, mapping.code, new Headers(error.headers), [
    { desc: ProblemDetailsSchema, value: details },
  ]);
}
