import { SessionStatus } from "../../gen/provision/v1/activation_pb.js";
import { type ActivationPolicy, RequiredAuthenticationLevel } from "../../gen/provision/v1/entitlement_pb.js";
import { bearerChallenge } from "../auth/access-tokens.js";
import { DomainError, invalidField, type ProblemKind } from "../platform/errors.js";
import { hardEnd, type LicenseTimeline, trialEnd, windowEnd } from "./license-ends.js";
import { addMs, dateOf, durationMs, earliest, hasEnded, notYetStarted } from "./policy-time.js";
import { productUnavailable } from "./product-lifecycle.js";
import { effectiveSubscription } from "./subscription-periods.js";

// The activation policy as pure functions of plain facts and `now`. Seats and device limits are not here:
// they are counted in the activation's database transaction.

export interface EntitlementFacts {
  id: string;
  isRevoked: boolean;
  allowLicenseActivation: boolean;
  isTemplate: boolean;
  isEntitlementTrial: boolean;
  expirationDateTime: Date | null;
  createdAt: Date;
  policy: ActivationPolicy | undefined;
  /** The licensed products' ids, in the entitlement's order. */
  productIds: string[];
  /**
   * Their codes and versions as stored now, for the product-code rule; null when not read (the ids were known).
   */
  products: { id: string; productCode: string; productVersion: string }[] | null;
  /** First activation with any of the entitlement's codes, when known; see firstActivationOf. */
  firstActivationAt?: Date | null;
  /** The entitlement has products, and none takes the activation or renewal (see ProductStatuses). */
  productsUnavailable?: boolean;
}

export interface CodeFacts {
  requiredAuthenticationLevel: number;
  email: string;
  userId: string;
  organizationGroupId: string;
  fingerprint: string;
  preAuthorizedDevices: string[];
  isDeleted: boolean;
  expirationTimeStamp: Date | null;
  requiresUserConsent: boolean;
  userConsent: boolean;
  isTrialActivation: boolean;
  activationCodeUseCount: number;
  maxActivationCodeUseCount: number;
  firstActivationAt: Date | null;
}

export interface ActivationAsk {
  fingerprint: string;
  email: string;
  targetSoftwareVersion: string;
  requestedLeaseMs: number | null;
  acceptLicenseTerms: boolean;
  /** The signed-in user (interactive activation), or null. */
  user: { id: string; groups: string[] } | null;
  /**
   * The application asked to activate as the signed-in user (useInteractiveUser): the invitation must name them,
   * as at level 3, on top of what the vendor's level asks (an email-bound code still needs its email).
   */
  asSignedInUser?: boolean;
}

export interface Lease {
  leaseExpiresAt: Date;
  graceEndsAt: Date;
  /** End of the trial for a trial activation with a trial policy that limits it; null otherwise. */
  trialEndsAt: Date | null;
}

export interface SessionFacts {
  leaseExpiresAt: Date;
  graceEndsAt: Date;
  released: boolean;
  ended: boolean;
  /** The session's activation was a trial (its code's isTrialActivation). */
  trial?: boolean;
  /** Start of activationPeriod and of a trial counted from first activation; defaults as in firstActivationOf. */
  firstActivationAt?: Date | null;
}

export interface FeatureFacts {
  featureCode: string;
  id: string;
  value: string;
  isEnabled: boolean;
  isAvailableDuringTrialPeriod: boolean;
  isAvailableDuringGracePeriod: boolean;
  featureExpiration: Date | null;
}

/** Lease when the entitlement has no claim-based policy or it sets no leaseTime. */
export const DEFAULT_LEASE_MS = 30 * 86_400_000;

/** The trial rules apply to a trial entitlement and to any activation with a trial code. */
export function isTrialActivation(entitlement: EntitlementFacts, code: Pick<CodeFacts, "isTrialActivation">): boolean {
  return entitlement.isEntitlementTrial || code.isTrialActivation;
}

/** The earlier of the entitlement's and the code's first activation; null = this activation is the first. */
export function firstActivationOf(entitlement: EntitlementFacts, code: CodeFacts): Date | null {
  return earliest(entitlement.firstActivationAt, code.firstActivationAt);
}

/**
 * Refuses an activation the policy forbids, checking in this order (the first failing rule answers):
 * code deleted, code expired, template, revoked, activation disabled, entitlement expired, products, time window,
 * trial, subscription, authentication level, product code, device binding, consent, code use limit.
 */
export function checkActivation(entitlement: EntitlementFacts, code: CodeFacts, ask: ActivationAsk, now: Date): void {
  const timeline = timelineOf(
    entitlement,
    isTrialActivation(entitlement, code),
    firstActivationOf(entitlement, code),
    now,
  );
  checkCode(code, now);
  checkStanding(entitlement, now);
  if (entitlement.productsUnavailable) throw productUnavailable("activate");
  checkWindow(timeline, now);
  checkTrial(timeline, now);
  checkSubscription(entitlement.policy, now);
  checkAuthentication(entitlement.policy, code, ask);
  checkProductCode(entitlement, ask.targetSoftwareVersion);
  checkDevice(code, ask.fingerprint);
  checkConsent(code, ask.acceptLicenseTerms);
  checkUseLimit(code);
}

/**
 * The lease of an activation or renewal: the requested length (null = the policy's) capped by the policy's
 * leaseTime (DEFAULT_LEASE_MS without one), then by the license's hard end (entitlement expiry, trial end,
 * time window end, subscription end). Grace = gracePeriod after the lease, also never past the hard end.
 * `firstActivationAt` null means this activation is the first.
 */
export function leaseFor(
  entitlement: EntitlementFacts,
  code: CodeFacts,
  requestedLeaseMs: number | null,
  now: Date,
  firstActivationAt: Date | null,
): Lease {
  if (requestedLeaseMs !== null && !(requestedLeaseMs > 0)) {
    throw invalidField("requestedLeaseDuration", "must be longer than zero");
  }
  const claim = entitlement.policy?.claimBasedActivation;
  const policyLeaseMs = durationMs(claim?.leaseTime) ?? DEFAULT_LEASE_MS;
  const leaseMs = requestedLeaseMs === null ? policyLeaseMs : Math.min(requestedLeaseMs, policyLeaseMs);
  const timeline = timelineOf(entitlement, isTrialActivation(entitlement, code), firstActivationAt, now);
  const end = hardEnd(timeline, now);
  const leaseExpiresAt = earliest(addMs(now, leaseMs), end) as Date;
  const graceEndsAt = earliest(addMs(leaseExpiresAt, durationMs(claim?.gracePeriod) ?? 0), end) as Date;
  return { leaseExpiresAt, graceEndsAt, trialEndsAt: trialEnd(timeline) };
}

/**
 * A session's standing, the first that holds: REVOKED; EXPIRED when the entitlement, trial or time window
 * has ended; SUBSCRIPTION_INACTIVE when the subscription has ended, or is inactive without soft enforcement;
 * RELEASED when released or ended by an administrator; EXPIRED when lease and grace are over; GRACE_PERIOD
 * when the lease is over, or the subscription is inactive under soft enforcement; ACTIVE.
 */
export function sessionStatus(entitlement: EntitlementFacts, session: SessionFacts, now: Date): SessionStatus {
  if (entitlement.isRevoked) return SessionStatus.REVOKED;
  const trial = entitlement.isEntitlementTrial || session.trial === true;
  const first = earliest(session.firstActivationAt, entitlement.firstActivationAt);
  const timeline = timelineOf(entitlement, trial, first, now);
  const licenseEnded =
    hasEnded(entitlement.expirationDateTime, now) ||
    hasEnded(trialEnd(timeline), now) ||
    hasEnded(windowEnd(timeline), now);
  if (licenseEnded) return SessionStatus.EXPIRED;
  const subscription = entitlement.policy?.subscriptionPolicy;
  const standing = subscription ? effectiveSubscription(subscription, now) : null;
  const subscriptionEnded = standing !== null && hasEnded(standing.endsAt, now);
  const inactive = subscriptionInactive(entitlement.policy);
  if (subscriptionEnded || (inactive && !subscription?.softEnforcement)) return SessionStatus.SUBSCRIPTION_INACTIVE;
  if (session.released || session.ended) return SessionStatus.RELEASED;
  if (hasEnded(session.graceEndsAt, now)) return SessionStatus.EXPIRED;
  if (hasEnded(session.leaseExpiresAt, now) || inactive) return SessionStatus.GRACE_PERIOD;
  return SessionStatus.ACTIVE;
}

/**
 * A subscription set inactive (by its vendor, or by the scheduler at its end): refused, or under softEnforcement
 * run in grace, with the features available during the grace period only.
 */
export function subscriptionInactive(policy: ActivationPolicy | undefined): boolean {
  const subscription = policy?.subscriptionPolicy;
  return subscription !== undefined && !subscription.isSubscriptionActive;
}

/**
 * The features a license token lists: enabled, not past featureExpiration, and available during the trial
 * (trial) and the grace period (inGrace) when those apply.
 */
export function enabledFeatures<F extends FeatureFacts>(
  features: F[],
  state: { trial: boolean; inGrace: boolean },
  now: Date,
): F[] {
  return features.filter(
    (feature) =>
      feature.isEnabled &&
      !hasEnded(feature.featureExpiration, now) &&
      (!state.trial || feature.isAvailableDuringTrialPeriod) &&
      (!state.inGrace || feature.isAvailableDuringGracePeriod),
  );
}

function timelineOf(
  entitlement: EntitlementFacts,
  trial: boolean,
  firstActivationAt: Date | null,
  now: Date,
): LicenseTimeline {
  return {
    expirationDateTime: entitlement.expirationDateTime,
    createdAt: entitlement.createdAt,
    policy: entitlement.policy,
    trial,
    firstActivationAt: firstActivationAt ?? now,
  };
}

function refuse(slug: string, message: string, kind: ProblemKind = "permission-denied"): DomainError {
  return new DomainError(kind, message, { slug });
}

function checkCode(code: CodeFacts, now: Date): void {
  if (code.isDeleted) throw refuse("code-deleted", "the activation code was deleted", "not-found");
  if (hasEnded(code.expirationTimeStamp, now))
    throw refuse("code-expired", "the activation code has expired", "not-found");
}

function checkStanding(entitlement: EntitlementFacts, now: Date): void {
  if (entitlement.isTemplate) throw refuse("template-not-activatable", "an entitlement template cannot be activated");
  if (entitlement.isRevoked) throw refuse("entitlement-revoked", "the entitlement was revoked");
  if (!entitlement.allowLicenseActivation)
    throw refuse("activation-disabled", "activation is disabled for the entitlement");
  if (hasEnded(entitlement.expirationDateTime, now)) throw refuse("entitlement-expired", "the entitlement has expired");
}

function checkWindow(timeline: LicenseTimeline, now: Date): void {
  const window = timeline.policy?.timeRestrictedActivationPolicy;
  if (window === undefined) return;
  if (notYetStarted(dateOf(window.notValidBeforeTimestamp), now)) {
    throw refuse("not-yet-valid", "the license is not valid yet (notValidBeforeTimestamp)");
  }
  if (hasEnded(windowEnd(timeline), now))
    throw refuse("validity-window-ended", "the license's validity window has ended");
}

function checkTrial(timeline: LicenseTimeline, now: Date): void {
  const trial = timeline.policy?.trialActivationPolicy;
  if (!timeline.trial || trial === undefined) return;
  if (notYetStarted(dateOf(trial.cannotActivateBeforeTimestamp), now)) {
    throw refuse("not-yet-valid", "the trial cannot be activated yet (cannotActivateBeforeTimestamp)");
  }
  if (hasEnded(trialEnd(timeline), now)) throw refuse("trial-ended", "the trial has ended");
}

function checkSubscription(policy: ActivationPolicy | undefined, now: Date): void {
  const subscription = policy?.subscriptionPolicy;
  if (subscription === undefined) return;
  // Ended before inactive: the scheduler also sets an ended subscription inactive.
  if (hasEnded(effectiveSubscription(subscription, now).endsAt, now)) {
    throw refuse("subscription-ended", "the subscription has ended");
  }
  if (!subscription.isSubscriptionActive && !subscription.softEnforcement) {
    throw refuse("subscription-inactive", "the subscription is not active");
  }
  if (notYetStarted(dateOf(subscription.cannotActivateBeforeTimestamp), now)) {
    throw refuse("not-yet-valid", "the subscription cannot be activated yet (cannotActivateBeforeTimestamp)");
  }
}

/** The stricter of the policy's and the code's level; unset counts as ActivationCode (1). */
export function authenticationLevel(policy: ActivationPolicy | undefined, code: CodeFacts): number {
  return Math.max(
    RequiredAuthenticationLevel.ACTIVATION_CODE,
    policy?.requiredAuthenticationLevel ?? 0,
    code.requiredAuthenticationLevel,
  );
}

/** A code issued without an email, before its entitlement's policy came to ask for one, can never match. */
function checkEmail(code: CodeFacts, ask: ActivationAsk): void {
  if (code.email.trim() === "") {
    throw refuse(
      "code-without-email",
      "the entitlement's policy asks for the email the activation code was issued to, and this code names none: ask the vendor for a new code",
    );
  }
  if (!sameEmail(code.email, ask.email)) {
    throw refuse("email-mismatch", "the email does not match the activation code's invitation");
  }
}

function checkAuthentication(policy: ActivationPolicy | undefined, code: CodeFacts, ask: ActivationAsk): void {
  const required = authenticationLevel(policy, code);
  if (required === RequiredAuthenticationLevel.EMAIL) checkEmail(code, ask);
  const level = ask.asSignedInUser ? Math.max(required, RequiredAuthenticationLevel.INTERACTIVE_USER) : required;
  const requiredGroup = policy?.requireOrganizationGroupMember ?? "";
  if (level < RequiredAuthenticationLevel.INTERACTIVE_USER && requiredGroup === "") return;
  const user = ask.user;
  if (user === null) throw userTokenRequired();
  if (level >= RequiredAuthenticationLevel.INTERACTIVE_USER && !isInvitee(code, user)) {
    throw refuse("user-not-invited", "the signed-in user is not the activation code's invitee nor in its group");
  }
  if (requiredGroup !== "" && !inGroup(user, requiredGroup)) {
    throw refuse(
      "organization-group-required",
      "the signed-in user is not in the organization group the policy requires",
    );
  }
}

/**
 * No bearer token where the policy asks for a signed-in user: 403 as the contract puts "authentication required",
 * with the Bearer challenge that says what to send.
 */
export function userTokenRequired(): DomainError {
  return new DomainError("permission-denied", "sign in: send the user's token as Authorization: Bearer <token>", {
    slug: "authentication-required",
    headers: { "www-authenticate": bearerChallenge() },
  });
}

function sameEmail(expected: string, given: string): boolean {
  const normalized = expected.trim().toLowerCase();
  return normalized !== "" && normalized === given.trim().toLowerCase();
}

/** A code naming no user and no group invites any signed-in user. */
function isInvitee(code: CodeFacts, user: { id: string; groups: string[] }): boolean {
  if (code.userId === "" && code.organizationGroupId === "") return true;
  return (
    (code.userId !== "" && code.userId.toLowerCase() === user.id.toLowerCase()) ||
    (code.organizationGroupId !== "" && inGroup(user, code.organizationGroupId))
  );
}

function inGroup(user: { groups: string[] }, groupId: string): boolean {
  const wanted = groupId.toLowerCase();
  return user.groups.some((group) => group.toLowerCase() === wanted);
}

function checkProductCode(entitlement: EntitlementFacts, targetSoftwareVersion: string): void {
  if (!entitlement.policy?.requireProductCode) return;
  if (entitlement.products === null) throw new Error("the product-code rule needs the products' codes, not read");
  const target = targetSoftwareVersion.trim().toLowerCase();
  const matches = entitlement.products.some((product) => {
    const code = product.productCode.toLowerCase();
    return target === code || target === `${code}:${product.productVersion.toLowerCase()}`;
  });
  if (!matches) {
    throw refuse(
      "product-code-required",
      'targetSoftwareVersion must be "<productCode>[:<productVersion>]" of a product of the entitlement',
    );
  }
}

function checkDevice(code: CodeFacts, fingerprint: string): void {
  const boundElsewhere = code.fingerprint !== "" && code.fingerprint !== fingerprint;
  const notListed = code.preAuthorizedDevices.length > 0 && !code.preAuthorizedDevices.includes(fingerprint);
  if (boundElsewhere || notListed) {
    throw refuse("device-not-authorized", "this device is not authorized to activate with the activation code");
  }
}

function checkConsent(code: CodeFacts, acceptLicenseTerms: boolean): void {
  if (code.requiresUserConsent && !code.userConsent && !acceptLicenseTerms) {
    throw refuse("consent-required", "accept the license terms (acceptLicenseTerms) to activate");
  }
}

function checkUseLimit(code: CodeFacts): void {
  if (code.maxActivationCodeUseCount > 0 && code.activationCodeUseCount >= code.maxActivationCodeUseCount) {
    throw refuse("code-use-limit-reached", "the activation code has been used as often as it may be", "conflict");
  }
}
