import { ActivationService } from "../../gen/provision/v1/activation_pb.js";
import { bearerOf } from "../auth/auth-interceptor.js";
import type { FastRoute } from "../server/rest/fast-route.js";
import type { LicenseClaims } from "./license-claims.js";
import type { LicenseTokens } from "./license-tokens.js";
import { checkIn, type SessionCallDependencies } from "./session-calls.js";

/**
 * The caller of a session call whose license token this instance verified before and whose path names the
 * token's session: what a session call's fast route recognises at once.
 */
export function rememberedSession(tokens: LicenseTokens): FastRoute<LicenseClaims>["caller"] {
  return (authorization, variables) => {
    const token = bearerOf(authorization);
    const claims = token === undefined ? undefined : tokens.remembered(token);
    return claims?.sessionId === variables.session_id ? claims : undefined;
  };
}

/**
 * REST check-in of a live session whose token this instance verified before: answered from the session and
 * standing caches. Any other check-in (a token not seen yet, another session's, a session ended) is left to
 * the full pipeline.
 */
export function checkInFastRoute(deps: SessionCallDependencies): FastRoute<LicenseClaims> {
  return {
    method: ActivationService.method.checkInSession,
    caller: rememberedSession(deps.tokens),
    async prepare(claims) {
      const answer = await checkIn(deps, claims.sessionId);
      return typeof answer === "number" ? undefined : async () => answer;
    },
  };
}
