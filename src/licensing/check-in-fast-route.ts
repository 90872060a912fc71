import { ActivationService } from "../../gen/provision/v1/activation_pb.js";
import type { FastRoute } from "../server/rest/fast-route.js";
import type { LicenseClaims } from "./license-claims.js";
import { rememberedSession } from "./remembered-session.js";
import { checkIn, type SessionCallDependencies } from "./session-calls.js";

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
