import { anyCovers, isValidScope } from "../auth/scopes.js";
import type { FieldViolation } from "../platform/errors.js";

/** The verbs a callback token may carry: never delete (spec, Authentication note 9). */
export const CALLBACK_VERBS = ["read", "create", "update", "write"] as const;

export interface CheckedCallbackScopes {
  /** The requested scopes without duplicates, in the order first requested. */
  scopes: string[];
  /** One per refused scope, naming `callbackScopes[i]` (its index in the request). */
  violations: FieldViolation[];
}

/**
 * Checks the callback scopes a subscription requests on creation or change: each must name one area and one
 * of CALLBACK_VERBS (no wildcard, no delete), and be covered by the scopes of the calling client.
 */
export function checkCallbackScopes(
  requested: readonly string[],
  callerScopes: readonly string[],
): CheckedCallbackScopes {
  const violations: FieldViolation[] = [];
  requested.forEach((scope, index) => {
    const refusal = refusalOf(scope, callerScopes);
    if (refusal) violations.push({ field: `callbackScopes[${index}]`, message: refusal });
  });
  return { scopes: [...new Set(requested)], violations };
}

function refusalOf(scope: string, callerScopes: readonly string[]): string | undefined {
  if (!isValidScope(scope)) return `${JSON.stringify(scope)} is not in the scope catalog`;
  const [area, verb] = scope.split(":");
  if (area === "*" || verb === undefined || verb === "*") return `${scope} may not use a wildcard`;
  if (!(CALLBACK_VERBS as readonly string[]).includes(verb))
    return `${scope} may not be a callback scope: the verb must be one of ${CALLBACK_VERBS.join(", ")}`;
  if (!anyCovers(callerScopes, scope)) return `${scope} is beyond the scopes of the calling client`;
  return undefined;
}
