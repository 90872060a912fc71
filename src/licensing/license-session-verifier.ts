import { bearerTokenOf, type LicenseSessionVerifier } from "../auth/auth-interceptor.js";
import type { LicenseTokens } from "./license-tokens.js";

/** Session calls' credential: `Authorization: Bearer <licenseToken>`, verified (or remembered) by LicenseTokens. */
export function licenseSessionVerifier(tokens: LicenseTokens): LicenseSessionVerifier {
  return async (authorization) => {
    const claims = await tokens.verify(bearerTokenOf(authorization, "the license token"));
    return {
      providerId: claims.providerId,
      session: { sessionId: claims.sessionId, entitlementId: claims.entitlementId },
    };
  };
}
