import type { Interceptor } from "@connectrpc/connect";
import { DomainError, invalidArgument } from "../platform/errors.js";
import { checkMessageLimits, isBatchOverCap } from "./request-limits.js";
import { screenRefusalKey } from "./rpc-screen.js";

/**
 * Refuses a request whose repeated or map fields hold more than their declared `provision.v1.max_items`,
 * before the service does any work; the same answer on REST, Connect and gRPC.
 */
export function limitsInterceptor(): Interceptor {
  return (next) => async (request) => {
    const screened = request.contextValues.get(screenRefusalKey);
    if (screened) throw screened;
    if (!request.stream) {
      const violations = checkMessageLimits(request.method.input, request.message);
      if (violations.length > 0) throw tooManyItemsError(violations, isBatchOverCap(request.method, violations));
    }
    return next(request);
  };
}

export function tooManyItemsError(violations: { field: string; message: string }[], wholeBatch = false) {
  const fields = violations.map((violation) => `${violation.field} ${violation.message}`);
  if (wholeBatch) {
    return new DomainError("too-large", `too many items in the batch: ${fields.join("; ")}`, {
      slug: "too-many-items",
      errors: violations,
    });
  }
  return invalidArgument(`too many items: ${fields.join("; ")}`, violations);
}
