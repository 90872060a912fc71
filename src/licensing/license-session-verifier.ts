import { bearerChallenge } from "../auth/access-tokens.js";
import type { LicenseSessionVerifier } from "../auth/auth-interceptor.js";
import { DomainError } from "../platform/errors.js";
import type { LicenseTokens } from "./license-tokens.js";

/** Session calls' credential: `Authorization: Bearer <licenseToken>`, verified (or remembered) by LicenseTokens. */
export function licenseSessionVerifier(tokens: LicenseTokens): LicenseSessionVerifier {
  return async (authorization) => {
    const match = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
    if (!match) {
      throw new DomainError("unauthenticated", "send the license token: Authorization: Bearer <licenseToken>", {
        slug: "unauthenticated",
        headers: { "www-authenticate": bearerChallenge() },
      });
    }
    const claims = await tokens.verify(match[1]);
    return {
      providerId: claims.providerId,
      session: { sessionId: claims.sessionId, entitlementId: claims.entitlementId },
    };
  };
}
