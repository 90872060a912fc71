import type { CheckInSessionResponse } from "../../gen/provision/v1/activation_pb.js";
import { ActivationService } from "../../gen/provision/v1/activation_pb.js";
import type { FastAnswer, FastRoute } from "../server/rest/fast-route.js";
import type { LicenseClaims } from "./license-claims.js";
import { rememberedSession } from "./remembered-session.js";
import { checkIn, checkInFromMemory, type SessionCallDependencies } from "./session-calls.js";

/**
 * REST check-in of a live session whose token this instance verified before: answered from the session and
 * standing caches (at once when both are kept). Any other check-in (a token not seen yet, another session's, a
 * session ended) is left to the full pipeline.
 */
export function checkInFastRoute(deps: SessionCallDependencies): FastRoute<LicenseClaims> {
  return {
    method: ActivationService.method.checkInSession,
    caller: rememberedSession(deps.tokens),
    prepare(claims) {
      const known = checkInFromMemory(deps, claims.sessionId);
      if (known !== undefined) return answerOf(known);
      return checkIn(deps, claims.sessionId).then(answerOf);
    },
  };
}

/** A live session's answer; a session no longer live (its state) is the full pipeline's to refuse. */
function answerOf(checkedIn: CheckInSessionResponse | number): FastAnswer | undefined {
  return typeof checkedIn === "number" ? undefined : () => checkedIn;
}
