import { create, toJsonString } from "@bufbuild/protobuf";
import { type Duration, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";
import { type License, LicenseSchema } from "../../gen/provision/v1/activation_pb.js";
import { type ActivationPolicy, ActivationPolicySchema } from "../../gen/provision/v1/entitlement_pb.js";
import type { Clock } from "../platform/clock.js";
import { inTransaction } from "../platform/database.js";
import { DomainError, invalidField } from "../platform/errors.js";
import { Violations } from "../platform/validation.js";
import { clientAddressKey } from "../server/client-address.js";
import { presentedCodeKey } from "./activation-code-format.js";
import { findActivationCodeForUpdate } from "./activation-code-store.js";
import {
  type ActivationAsk,
  checkActivation,
  enabledFeatures,
  firstActivationOf,
  isTrialActivation,
  leaseFor,
} from "./activation-rules.js";
import { type LicenseSessionRow, SESSION_STATE } from "./entities.js";
import { buildLicenseClaims, fingerprintHash } from "./license-claims.js";
import { codeFacts, entitlementFacts, featureClaims, featureFacts } from "./license-facts.js";
import type { LicenseKeys } from "./license-keys.js";
import type { LicenseTokens } from "./license-tokens.js";
import { claimSeat } from "./seat-allocation.js";
import type { SessionStore } from "./session-store.js";

export interface ActivationDependencies {
  dataSource: DataSource;
  store: SessionStore;
  keys: LicenseKeys;
  tokens: LicenseTokens;
  clock: Clock;
  newId: () => string;
  sessionsChanged: (...sessionIds: string[]) => Promise<void>;
  entitlementChanged: (entitlementId: string) => Promise<void>;
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
 * Activation code + device fingerprint → a session on a seat and its signed license. One transaction: the
 * entitlement's row is locked first, so the rules and the seat counts it reads hold until it commits.
 */
export async function activate(
  deps: ActivationDependencies,
  request: ActivationRequest,
  context: HandlerContext,
): Promise<License> {
  const key = checkRequest(request);
  const now = deps.clock.now();
  const ask: ActivationAsk = {
    fingerprint: request.fingerprint,
    email: request.email,
    targetSoftwareVersion: request.targetSoftwareVersion,
    requestedLeaseMs: requestedLeaseMs(request.requestedLeaseDuration),
    acceptLicenseTerms: request.acceptLicenseTerms,
    user: null,
  };
  const clientAddress = context.values.get(clientAddressKey);
  const activated = await inTransaction(deps.dataSource, (manager) =>
    activateInTransaction(deps, manager, { key, ask, now, clientAddress }),
  );
  if (activated.replaced.length > 0) await deps.sessionsChanged(...activated.replaced);
  if (activated.trialStarted) await deps.entitlementChanged(activated.session.entitlementId);
  return licenseOf(deps, activated, now);
}

function checkRequest(request: ActivationRequest): string {
  if (request.useInteractiveUser) {
    throw new DomainError("unimplemented", "interactive-user activation is not available yet", {
      slug: "interactive-user-unavailable",
    });
  }
  const violations = new Violations();
  if (!request.fingerprint.trim()) violations.add("fingerprint", "is required");
  if (request.fingerprint.length > MAX_FINGERPRINT)
    violations.add("fingerprint", `must be at most ${MAX_FINGERPRINT} characters`);
  if (request.email.length > MAX_EMAIL) violations.add("email", `must be at most ${MAX_EMAIL} characters`);
  if (request.targetSoftwareVersion.length > MAX_SOFTWARE_VERSION) {
    violations.add("targetSoftwareVersion", `must be at most ${MAX_SOFTWARE_VERSION} characters`);
  }
  if (!request.activationCode.trim()) violations.add("activationCode", "is required");
  violations.throwIfAny();
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
  input: { key: string; ask: ActivationAsk; now: Date; clientAddress: string },
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
  const codeFact = codeFacts(code);
  checkActivation(facts, codeFact, ask, now);

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
