import { type DescMethod, getOption } from "@bufbuild/protobuf";
import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { AuthMode, type AuthRequirement, auth } from "../../gen/provision/v1/auth_pb.js";
import { DomainError } from "../platform/errors.js";
import { providerIdKey } from "../server/tenant.js";
import { type AccessTokenClaims, type AccessTokens, bearerChallenge } from "./access-tokens.js";
import type { ClientStates } from "./client-states.js";
import { anyCovers } from "./scopes.js";

/** The client a request was authenticated as, for services that need more than the provider. */
export const clientPrincipalKey = createContextKey<AccessTokenClaims | undefined>(undefined, {
  description: "authenticated OAuth client",
});

/** The license session a session call's token belongs to. */
export interface LicenseSessionCaller {
  sessionId: string;
  entitlementId: string;
}

/** The verified license session of a session call (renew, check-in, release, usage reports). */
export const licenseSessionKey = createContextKey<LicenseSessionCaller | undefined>(undefined, {
  description: "verified license session",
});

/** Verifies a license session token (`Authorization: Bearer <licenseToken>`). */
export type LicenseSessionVerifier = (
  authorization: string | null,
) => Promise<{ providerId: string; session: LicenseSessionCaller }>;

/**
 * Set by the in-process REST call, which authorizes before it reads the body: the interceptor then takes this
 * caller instead of checking the same credential twice.
 */
export const authorizedCallerKey = createContextKey<Caller | undefined>(undefined, {
  description: "caller authorized before the call",
});

export interface AuthInterceptorOptions {
  tokens: AccessTokens;
  clients: ClientStates;
  /** Whether a webhook callback token's subscription still grants what the token claims. */
  callbackGrants?: { stillGrants(claims: Required<AccessTokenClaims>): Promise<boolean> };
  licenseSessions?: LicenseSessionVerifier;
}

/**
 * Enforces each method's declared `provision.v1.auth` requirement, the same for REST, Connect and gRPC,
 * and puts the caller's provider in the request context. A method without a requirement is refused.
 */
export function authInterceptor(options: AuthInterceptorOptions): Interceptor {
  const authorize = createAuthorizer(options);
  return (next) => async (request) => {
    const caller = request.contextValues.get(authorizedCallerKey) ?? (await authorize(request.method, request.header));
    if (caller.providerId) request.contextValues.set(providerIdKey, caller.providerId);
    if (caller.client) request.contextValues.set(clientPrincipalKey, caller.client);
    if (caller.session) request.contextValues.set(licenseSessionKey, caller.session);
    return next(request);
  };
}

export interface Caller {
  /** Empty for anonymous methods. */
  providerId: string;
  client?: AccessTokenClaims;
  session?: LicenseSessionCaller;
}

/**
 * Checks a call of `method` with these request headers against its declared requirement; throws the
 * DomainError to answer otherwise. The interceptor runs it for every protocol; REST runs it once more
 * before reading a body, so an unauthenticated caller learns nothing from validation.
 */
export function createAuthorizer(options: AuthInterceptorOptions) {
  return async function authorize(method: DescMethod, headers: Headers): Promise<Caller> {
    const requirement = requirementOf(method);
    switch (requirement.mode) {
      case AuthMode.ANONYMOUS:
        return { providerId: "" };
      case AuthMode.CLIENT: {
        const client = await authenticateClient(options, headers.get("authorization"));
        if (!anyCovers(client.scopes, requirement.scope)) {
          throw new DomainError("permission-denied", `this operation needs the scope ${requirement.scope}`, {
            slug: "insufficient-scope",
            headers: {
              "www-authenticate": bearerChallenge("insufficient_scope", "scope missing", requirement.scope),
            },
          });
        }
        return { providerId: client.providerId, client };
      }
      case AuthMode.LICENSE_SESSION: {
        if (!options.licenseSessions) {
          throw new DomainError("unimplemented", "license sessions are not implemented yet", {
            slug: "unimplemented",
          });
        }
        return options.licenseSessions(headers.get("authorization"));
      }
      default:
        throw new DomainError("permission-denied", `${method.name} declares no authentication requirement`);
    }
  };
}

const requirements = new WeakMap<DescMethod, AuthRequirement>();

function requirementOf(method: DescMethod): AuthRequirement {
  let requirement = requirements.get(method);
  if (!requirement) {
    requirement = getOption(method, auth);
    requirements.set(method, requirement);
  }
  return requirement;
}

/** The token of `Authorization: Bearer <token>`; unauthenticated, asking for `what`, when there is none. */
export function bearerTokenOf(authorization: string | null, what: string): string {
  const token = bearerOf(authorization);
  if (token === undefined) {
    throw new DomainError("unauthenticated", `send ${what}: Authorization: Bearer <token>`, {
      slug: "unauthenticated",
      headers: { "www-authenticate": bearerChallenge() },
    });
  }
  return token;
}

/** The token of `Authorization: Bearer <token>`, or undefined. */
export function bearerOf(authorization: string | null | undefined): string | undefined {
  return authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] : undefined;
}

async function authenticateClient(options: AuthInterceptorOptions, authorization: string | null) {
  const claims = await options.tokens.verify(bearerTokenOf(authorization, "an access token"));
  const client = await options.clients.get(claims.clientId);
  // A client disabled, deleted (even if made again with its id) or given a new secret since has another
  // token generation: every token issued before is refused, for good.
  const current =
    client !== null &&
    client.clientId === claims.clientId &&
    !client.disabled &&
    client.providerId === claims.providerId &&
    client.tokenGeneration === claims.generation;
  if (!current) {
    throw new DomainError(
      "unauthenticated",
      "the access token was revoked: its client has been disabled, deleted or given a new secret since",
      {
        slug: "invalid-token",
        headers: { "www-authenticate": bearerChallenge("invalid_token", "token revoked") },
      },
    );
  }
  const { subscriptionId } = claims;
  if (subscriptionId && !(await options.callbackGrants?.stillGrants({ ...claims, subscriptionId }))) {
    throw new DomainError(
      "unauthenticated",
      "the callback token was revoked: its webhook subscription has been deleted or its callback scopes changed",
      {
        slug: "invalid-token",
        headers: { "www-authenticate": bearerChallenge("invalid_token", "token revoked") },
      },
    );
  }
  return claims;
}
