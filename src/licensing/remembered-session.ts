import { bearerOf } from "../auth/auth-interceptor.js";
import type { FastRoute } from "../server/rest/fast-route.js";
import type { LicenseClaims } from "./license-claims.js";
import type { LicenseTokens } from "./license-tokens.js";

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
