import type { ActivationPolicy } from "../../gen/provision/v1/entitlement_pb.js";
import { bearerTokenOf } from "../auth/auth-interceptor.js";
import { readSerially } from "../platform/database.js";
import { DomainError } from "../platform/errors.js";
import type { ActivationDependencies } from "./activation.js";
import { findUserInvitations } from "./activation-code-store.js";
import { userTokenRequired } from "./activation-rules.js";
import { checkHostAllowed } from "./client-host-names.js";
import { type InteractiveUser, interactiveUserNotConfigured, type UserTokens } from "./user-tokens.js";

// What activation needs from outside its transaction (the signed-in user, the caller's host names) and the
// rules that use it. A transaction that finds it needs one of them rolls back; it is fetched, then run again.

/**
 * What an activation learns over the network (the user's token, the caller's host names): always outside its
 * transaction, so no row lock is held while the issuer's keys or the DNS answer.
 */
export interface Preparation {
  headers: Headers;
  user: InteractiveUser | null;
  /** The user's token was verified (or must be: useInteractiveUser). */
  userChecked: boolean;
  hostNames: string[] | undefined;
}

/** Thrown in the transaction when the locked rows need what is not prepared: rolled back, prepared, run again. */
export class Unprepared extends Error {
  constructor(readonly need: "user" | "host-names") {
    super(`activation needs ${need} first`);
  }
}

/** Runs the activation, preparing what it asks for (each thing once) and running it again. */
export async function withPreparation<T>(
  deps: ActivationDependencies,
  prepared: Preparation,
  clientAddress: string,
  run: () => Promise<T>,
): Promise<T> {
  for (;;) {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof Unprepared)) throw error;
      if (error.need === "user") {
        prepared.user = await signIn(deps, prepared.headers);
        prepared.userChecked = true;
      } else {
        prepared.hostNames = await deps.hostNames.resolve(clientAddress);
      }
    }
  }
}

/** The token of the user signing in (403 when no issuer is trusted or none is sent), not verified yet. */
function userToken(deps: ActivationDependencies, headers: Headers): { tokens: UserTokens; token: string } {
  if (!deps.userTokens) throw interactiveUserNotConfigured();
  const authorization = headers.get("authorization");
  if (!authorization) throw userTokenRequired();
  return { tokens: deps.userTokens, token: bearerTokenOf(authorization, "the user's token") };
}

export function signIn(deps: ActivationDependencies, headers: Headers): Promise<InteractiveUser> {
  const { tokens, token } = userToken(deps, headers);
  return tokens.verify(token);
}

/** The newest live code inviting the user, when their invitations name exactly one entitlement. */
export async function invitedCodeKey(deps: ActivationDependencies, user: InteractiveUser, now: Date): Promise<string> {
  const found = await readSerially(deps.dataSource, () => findUserInvitations(deps.dataSource.manager, user, now));
  if (found.entitlementIds.length > 1) {
    throw new DomainError(
      "invalid-argument",
      "activationCode: is required, the signed-in user is invited to several entitlements",
      {
        slug: "activation-code-required",
        errors: [{ field: "activationCode", message: "is required: the user is invited to several entitlements" }],
      },
    );
  }
  if (found.codeKey === null) {
    throw new DomainError("not-found", "no live activation code invites the signed-in user", {
      slug: "code-not-found",
    });
  }
  return found.codeKey;
}

/**
 * Runs the rules; when they ask for a signed-in user (level 3, requireOrganizationGroupMember) and a token
 * was not verified yet, the transaction is run again once the token has been, outside it.
 */
export function checkSignedIn(deps: ActivationDependencies, prepared: Preparation, rules: () => void): void {
  try {
    rules();
  } catch (error) {
    const wantsUser = error instanceof DomainError && error.slug === "authentication-required";
    if (!wantsUser || prepared.userChecked) throw error;
    userToken(deps, prepared.headers);
    throw new Unprepared("user");
  }
}

/** requireAclHostNameMember: names from the cache, or the transaction is run again once DNS answered. */
export function checkHost(
  deps: ActivationDependencies,
  policy: ActivationPolicy | undefined,
  clientAddress: string,
  prepared: Preparation,
): void {
  const allowed = policy?.requireAclHostNameMember ?? [];
  if (allowed.length === 0) return;
  const names = prepared.hostNames ?? deps.hostNames.cached(clientAddress);
  if (names === undefined) throw new Unprepared("host-names");
  checkHostAllowed(allowed, names);
}

export function workflowRequired(): DomainError {
  return new DomainError(
    "permission-denied",
    "the entitlement is activated only with the activation code of an invitation (requireActivationWorkflow)",
    { slug: "activation-workflow-required" },
  );
}
