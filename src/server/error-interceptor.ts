import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import { DomainError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
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

/** An RPC's failure as every protocol answers it; anything unexpected is logged and becomes `internal`. */
export function connectErrorOf(
  error: unknown,
  logger: Logger,
  where: { requestId: string | string[] | null | undefined; procedure: string },
): ConnectError {
  if (error instanceof DomainError) return toConnectError(error);
  if (error instanceof ConnectError) return error;
  logger.error({ err: error, ...where }, "unhandled error in RPC");
  return new ConnectError("internal error", Code.Internal);
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
