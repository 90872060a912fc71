import type { HandlerContext } from "@connectrpc/connect";
import { DomainError } from "../platform/errors.js";
import { bearerChallenge } from "./access-tokens.js";
import { clientPrincipalKey } from "./auth-interceptor.js";
import { anyCovers } from "./scopes.js";

/**
 * Refuses (403 `insufficient-scope`) unless the calling client holds every one of `scopes`: no client may grant,
 * or manage what carries, more than it holds itself.
 */
export function refuseScopesBeyondCaller(context: HandlerContext, scopes: readonly string[], what: string): void {
  const caller = context.values.get(clientPrincipalKey);
  const beyond = scopes.filter((scope) => !anyCovers(caller?.scopes ?? [], scope));
  if (beyond.length > 0) {
    throw new DomainError("permission-denied", `you cannot ${what}: ${beyond.join(" ")}`, {
      slug: "insufficient-scope",
      headers: { "www-authenticate": bearerChallenge("insufficient_scope", "scope missing", beyond.join(" ")) },
    });
  }
}
