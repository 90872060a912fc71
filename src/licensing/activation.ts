import { create, toJsonString } from "@bufbuild/protobuf";
import { type Duration, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";
import { type License, LicenseSchema } from "../../gen/provision/v1/activation_pb.js";
import {
  type ActivationPolicy,
  ActivationPolicySchema,
  RequiredAuthenticationLevel,
} from "../../gen/provision/v1/entitlement_pb.js";
import { bearerTokenOf } from "../auth/auth-interceptor.js";
import type { Clock } from "../platform/clock.js";
import { inTransaction, readSerially } from "../platform/database.js";
import { DomainError, invalidField } from "../platform/errors.js";
import { Violations } from "../platform/validation.js";
import { clientAddressKey } from "../server/client-address.js";
import { presentedCodeKey } from "./activation-code-format.js";
import { findActivationCodeForUpdate, findUserInvitations } from "./activation-code-store.js";
import {
  type ActivationAsk,
  type CodeFacts,
  checkActivation,
  enabledFeatures,
  firstActivationOf,
  isTrialActivation,
  leaseFor,
} from "./activation-rules.js";
import { type ClientHostNames, checkHostAllowed } from "./client-host-names.js";
import { type LicenseSessionRow, SESSION_STATE } from "./entities.js";
import { buildLicenseClaims, fingerprintHash } from "./license-claims.js";
import { codeFacts, entitlementFacts, featureClaims, featureFacts } from "./license-facts.js";
import type { LicenseKeys } from "./license-keys.js";
import type { LicenseTokens } from "./license-tokens.js";
import { claimSeat } from "./seat-allocation.js";
import type { SessionStore } from "./session-store.js";
import {
  type InteractiveUser,
  interactiveUserNotConfigured,
  type UserTokens,
  userTokenRequired,
} from "./user-tokens.js";

export interface ActivationDependencies {
  dataSource: DataSource;
  store: SessionStore;
  keys: LicenseKeys;
  tokens: LicenseTokens;
  clock: Clock;
  newId: () => string;
  sessionsChanged: (...sessionIds: string[]) => Promise<void>;
  entitlementChanged: (entitlementId: string) => Promise<void>;
  /** Verifies interactive users' bearer tokens; null when no user-token issuer is configured. */
  userTokens: UserTokens | null;
  /** Callers' reverse-DNS names, for requireAclHostNameMember. */
  hostNames: ClientHostNames;
}

/** The fields ActivateLicense and ActivateJwt share. */
export interface ActivationRequest {
  activationCode: string;
  fingerprint: string;
  email: string;
  requestedLeaseDuration?: Duration;
  targetSoftwareVersion: string;
  useInteractiveUser: boolean;
  acceptLicenseTerms: boolean;
}

const MAX_FINGERPRINT = 512;
const MAX_EMAIL = 320;
const MAX_SOFTWARE_VERSION = 255;

interface Activated {
  session: LicenseSessionRow;
  providerId: string;
  legalNotice: string;
  description: string;
  productIds: string[];
  features: Record<string, string>;
  offlineAllowed: boolean;
  trial: boolean;
  replaced: string[];
  trialStarted: boolean;
}

/**
 * What an activation learns over the network (the user's token, the caller's host names): always outside its
 * transaction, so no row lock is held while the issuer's keys or the DNS answer.
 */
interface Preparation {
  headers: Headers;
  user: InteractiveUser | null;
  /** The user's token was verified (or must be: useInteractiveUser). */
  userChecked: boolean;
  hostNames: string[] | undefined;
}

/** Thrown in the transaction when the locked rows need what is not prepared: rolled back, prepared, run again. */
class Unprepared extends Error {
  constructor(readonly need: "user" | "host-names") {
    super(`activation needs ${need} first`);
  }
}

/**
 * Activation code + device fingerprint → a session on a seat and its signed license. One transaction: the
 * entitlement's row is locked first, so the rules and the seat counts it reads hold until it commits.
 * With useInteractiveUser the user's token is verified first, and the code may be left out when the user's
 * invitations name exactly one entitlement.
 */
export async function activate(
  deps: ActivationDependencies,
  request: ActivationRequest,
  context: HandlerContext,
): Promise<License> {
  const presented = checkRequest(request);
  const now = deps.clock.now();
  const prepared: Preparation = {
    headers: context.requestHeader,
    user: null,
    userChecked: false,
    hostNames: undefined,
  };
  if (request.useInteractiveUser) {
    prepared.user = await signIn(deps, prepared.headers);
    prepared.userChecked = true;
  }
  const key = presented ?? (await invitedCodeKey(deps, prepared.user as InteractiveUser, now));
  const ask: Omit<ActivationAsk, "user"> = {
    fingerprint: request.fingerprint,
    email: request.email,
    targetSoftwareVersion: request.targetSoftwareVersion,
    requestedLeaseMs: requestedLeaseMs(request.requestedLeaseDuration),
    acceptLicenseTerms: request.acceptLicenseTerms,
  };
  const clientAddress = context.values.get(clientAddressKey);
  const input = { key, now, clientAddress, prepared, interactive: request.useInteractiveUser, presented };
  const activated = await withPreparation(deps, prepared, clientAddress, () =>
    inTransaction(deps.dataSource, (manager) =>
      // The user as prepared so far: a run again after signing in sees them.
      activateInTransaction(deps, manager, { ...input, ask: { ...ask, user: prepared.user } }),
    ),
  );
  if (activated.replaced.length > 0) await deps.sessionsChanged(...activated.replaced);
  if (activated.trialStarted) await deps.entitlementChanged(activated.session.entitlementId);
  return licenseOf(deps, activated, now);
}

/** Runs the activation, preparing what it asks for (each thing once) and running it again. */
async function withPreparation<T>(
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

/** The token of the user signing in: 403 when no issuer is trusted, 401 when none is sent; not verified yet. */
function userToken(deps: ActivationDependencies, headers: Headers): { tokens: UserTokens; token: string } {
  if (!deps.userTokens) throw interactiveUserNotConfigured();
  const authorization = headers.get("authorization");
  if (!authorization) throw userTokenRequired();
  return { tokens: deps.userTokens, token: bearerTokenOf(authorization, "the user's token") };
}

function signIn(deps: ActivationDependencies, headers: Headers): Promise<InteractiveUser> {
  const { tokens, token } = userToken(deps, headers);
  return tokens.verify(token);
}

/** The newest live code inviting the user, when their invitations name exactly one entitlement. */
async function invitedCodeKey(deps: ActivationDependencies, user: InteractiveUser, now: Date): Promise<string> {
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

/** The presented code's lookup key; null when left out with useInteractiveUser. */
function checkRequest(request: ActivationRequest): string | null {
  const violations = new Violations();
  if (!request.fingerprint.trim()) violations.add("fingerprint", "is required");
  if (request.fingerprint.length > MAX_FINGERPRINT)
    violations.add("fingerprint", `must be at most ${MAX_FINGERPRINT} characters`);
  if (request.email.length > MAX_EMAIL) violations.add("email", `must be at most ${MAX_EMAIL} characters`);
  if (request.targetSoftwareVersion.length > MAX_SOFTWARE_VERSION) {
    violations.add("targetSoftwareVersion", `must be at most ${MAX_SOFTWARE_VERSION} characters`);
  }
  const leftOut = !request.activationCode.trim();
  if (leftOut && !request.useInteractiveUser) violations.add("activationCode", "is required");
  violations.throwIfAny();
  if (leftOut) return null;
  const key = presentedCodeKey(request.activationCode);
  if (key === null) throw invalidField("activationCode", "is not a valid activation code");
  return key;
}

/** A requested lease in milliseconds; null when not sent (the policy's lease then). */
export function requestedLeaseMs(duration: Duration | undefined): number | null {
  return duration ? durationMs(duration) : null;
}

async function activateInTransaction(
  deps: ActivationDependencies,
  manager: EntityManager,
  input: {
    key: string;
    ask: ActivationAsk;
    now: Date;
    clientAddress: string;
    prepared: Preparation;
    interactive: boolean;
    presented: string | null;
  },
): Promise<Activated> {
  const { store } = deps;
  const { ask, now } = input;
  const located = await findActivationCodeForUpdate(manager, input.key);
  if (!located) throw codeNotFound();
  // Lock order: entitlement, then code, as every other write that takes both.
  const entitlement = await store.lockEntitlement(manager, located.entitlementId);
  const code = await findActivationCodeForUpdate(manager, input.key);
  if (!entitlement || !code) throw codeNotFound();
  const products = await store.licensedProducts(manager, entitlement.id);
  const facts = entitlementFacts(entitlement, products, await store.firstActivation(manager, entitlement.id));
  const codeFact = input.interactive ? asInteractive(codeFacts(code)) : codeFacts(code);
  checkSignedIn(deps, input.prepared, () => checkActivation(facts, codeFact, ask, now));
  if (input.presented === null && facts.policy?.requireActivationWorkflow) throw workflowRequired();
  checkHost(deps, facts.policy, input.clientAddress, input.prepared);

  const hash = fingerprintHash(ask.fingerprint);
  const replaced = await store.endSessionsOfDevice(manager, entitlement.id, hash, now);
  const claim = facts.policy?.claimBasedActivation;
  await claimSeat(manager, store, {
    entitlementId: entitlement.id,
    claim,
    code,
    fingerprint: ask.fingerprint,
    fingerprintHash: hash,
    now,
  });
  await store.recordCodeUse(manager, code.id, ask.acceptLicenseTerms, now);
  const lease = leaseFor(facts, codeFact, ask.requestedLeaseMs, now, firstActivationOf(facts, codeFact));
  const trialStarted = await recordTrialStart(store, manager, facts.policy, entitlement.id, lease.trialEndsAt, now);
  const session: LicenseSessionRow = {
    id: deps.newId(),
    providerId: entitlement.providerId,
    entitlementId: entitlement.id,
    activationCodeId: code.id,
    fingerprint: ask.fingerprint,
    fingerprintHash: hash,
    state: SESSION_STATE.live,
    isFloating: claim?.isFloatingLicense ?? false,
    activatedAt: now,
    leaseExpiresAt: lease.leaseExpiresAt,
    graceEndsAt: lease.graceEndsAt,
    lastCheckInAt: now,
    softwareVersion: ask.targetSoftwareVersion,
    clientAddress: input.clientAddress.slice(0, 64),
    endedAt: null,
  };
  await store.insertSession(manager, session);
  const trial = isTrialActivation(facts, codeFact);
  const features = (await store.entitlementFeatures(manager, entitlement.id)).map(featureFacts);
  return {
    session,
    providerId: entitlement.providerId,
    legalNotice: entitlement.legalNoticeHtml ?? "",
    description: entitlement.description ?? "",
    productIds: products.map((product) => product.id),
    features: featureClaims(enabledFeatures(features, { trial, inGrace: false }, now)),
    offlineAllowed: claim?.allowOffLineUse ?? false,
    trial,
    replaced,
    trialStarted,
  };
}

/** With useInteractiveUser the invitation must name the signed-in user (or a group of theirs), as at level 3. */
function asInteractive(code: CodeFacts): CodeFacts {
  const level = Math.max(code.requiredAuthenticationLevel, RequiredAuthenticationLevel.INTERACTIVE_USER);
  return { ...code, requiredAuthenticationLevel: level };
}

/**
 * Runs the rules; when they ask for a signed-in user (level 3, requireOrganizationGroupMember) and a token
 * was not verified yet, the transaction is run again once the token has been, outside it.
 */
function checkSignedIn(deps: ActivationDependencies, prepared: Preparation, rules: () => void): void {
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
function checkHost(
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

function workflowRequired(): DomainError {
  return new DomainError(
    "permission-denied",
    "the entitlement is activated only with the activation code of an invitation (requireActivationWorkflow)",
    { slug: "activation-workflow-required" },
  );
}

/** A trial counted from the first activation starts now: its end is recorded on the policy (trialEndsAt). */
async function recordTrialStart(
  store: SessionStore,
  manager: EntityManager,
  policy: ActivationPolicy | undefined,
  entitlementId: string,
  trialEndsAt: Date | null,
  now: Date,
): Promise<boolean> {
  const trialPolicy = policy?.trialActivationPolicy;
  if (!policy || !trialPolicy || trialPolicy.trialEndsAt || !trialEndsAt) return false;
  trialPolicy.trialEndsAt = timestampFromDate(trialEndsAt);
  await store.storeActivationPolicy(manager, entitlementId, toJsonString(ActivationPolicySchema, policy), now);
  return true;
}

async function licenseOf(deps: ActivationDependencies, activated: Activated, now: Date): Promise<License> {
  const { session } = activated;
  const claims = buildLicenseClaims({
    providerId: activated.providerId,
    entitlementId: session.entitlementId,
    sessionId: session.id,
    issuedAt: now,
    leaseEndsAt: session.leaseExpiresAt,
    graceEndsAt: session.graceEndsAt,
    productIds: activated.productIds,
    features: activated.features,
    offlineAllowed: activated.offlineAllowed,
    trial: activated.trial,
    fingerprint: session.fingerprint,
  });
  const [licenseToken, tokenPublicKeyBase64] = await Promise.all([
    deps.tokens.sign(claims),
    deps.keys.publicKeyBase64(activated.providerId),
  ]);
  return create(LicenseSchema, {
    licenseToken,
    tokenPublicKeyBase64,
    version: 1,
    legalNotice: activated.legalNotice,
    description: activated.description,
    licensedProducts: activated.productIds,
  });
}

function codeNotFound(): DomainError {
  return new DomainError("not-found", "no activation code matches", { slug: "code-not-found" });
}
