import type { Interceptor } from "@connectrpc/connect";
import { invalidArgument } from "../platform/errors.js";
import { checkMessageLimits } from "./request-limits.js";

/**
 * Refuses a request whose repeated or map fields hold more than their declared `provision.v1.max_items`,
 * before the service does any work; the same answer on REST, Connect and gRPC.
 */
export function limitsInterceptor(): Interceptor {
  return (next) => async (request) => {
    if (!request.stream) {
      const violations = checkMessageLimits(request.method.input, request.message);
      if (violations.length > 0) throw tooManyItemsError(violations);
    }
    return next(request);
  };
}

export function tooManyItemsError(violations: { field: string; message: string }[]) {
  const fields = violations.map((violation) => `${violation.field} ${violation.message}`);
  return invalidArgument(`too many items: ${fields.join("; ")}`, violations);
}
