import { preAuthorizedDevicesOf } from "./activation-code-mapper.js";
import {
  type CodeFacts,
  type EntitlementFacts,
  enabledFeatures,
  type FeatureFacts,
  subscriptionInactive,
} from "./activation-rules.js";
import type { ActivationCodeRow, EntitlementFeatureRow, EntitlementRow } from "./entities.js";
import { buildLicenseClaims, type LicenseClaims } from "./license-claims.js";
import type { LicensedProducts } from "./session-store.js";
import { sharedPolicyOf } from "./shared-policies.js";

export function entitlementFacts(
  row: EntitlementRow,
  products: LicensedProducts,
  firstActivationAt: Date | null,
): EntitlementFacts {
  return {
    id: row.id,
    isRevoked: row.isRevoked,
    allowLicenseActivation: row.allowLicenseActivation,
    isTemplate: row.isTemplate,
    isEntitlementTrial: row.isEntitlementTrial,
    expirationDateTime: row.expirationDateTime,
    createdAt: row.createdAt,
    policy: sharedPolicyOf(row.activationPolicy),
    productIds: products.ids,
    products: products.current,
    firstActivationAt,
  };
}

export function codeFacts(row: ActivationCodeRow): CodeFacts {
  return {
    requiredAuthenticationLevel: row.requiredAuthenticationLevel,
    email: row.email,
    userId: row.userId,
    organizationGroupId: row.organizationGroupId,
    fingerprint: row.fingerprint,
    preAuthorizedDevices: preAuthorizedDevicesOf(row),
    isDeleted: row.isDeleted,
    expirationTimeStamp: row.expirationTimeStamp,
    requiresUserConsent: row.requiresUserConsent,
    userConsent: row.userConsent,
    isTrialActivation: row.isTrialActivation,
    activationCodeUseCount: row.activationCodeUseCount,
    maxActivationCodeUseCount: row.maxActivationCodeUseCount,
    firstActivationAt: row.activationTimeStamp,
  };
}

export function featureFacts(row: EntitlementFeatureRow): FeatureFacts {
  return {
    featureCode: row.featureCode ?? "",
    id: row.id,
    value: row.value ?? "",
    isEnabled: row.isEnabled,
    isAvailableDuringTrialPeriod: row.isAvailableDuringTrialPeriod,
    isAvailableDuringGracePeriod: row.isAvailableDuringGracePeriod,
    featureExpiration: row.featureExpiration,
  };
}

/** The `fea` claim: enabled features by code (or id when a feature has none) → value. */
export function featureClaims(features: FeatureFacts[]): Record<string, string> {
  const claims: Record<string, string> = {};
  for (const feature of features) claims[claimKey(feature)] = feature.value;
  return claims;
}

/** The ends of the `fea` claim's features that have a featureExpiration, by the same keys. */
function featureExpirations(features: FeatureFacts[]): Record<string, Date> {
  const ends: Record<string, Date> = {};
  for (const feature of features) if (feature.featureExpiration) ends[claimKey(feature)] = feature.featureExpiration;
  return ends;
}

function claimKey(feature: FeatureFacts): string {
  return feature.featureCode || feature.id;
}

/** Of features sharing a claim key (a code, each of another product), the first listed. */
function firstPerKey(features: FeatureFacts[]): FeatureFacts[] {
  const first = new Map<string, FeatureFacts>();
  for (const feature of features) if (!first.has(claimKey(feature))) first.set(claimKey(feature), feature);
  return [...first.values()];
}

/** The features of the licensed products, in the products' order (then as stored). */
function licensedFeatures(features: EntitlementFeatureRow[], productIds: readonly string[]): EntitlementFeatureRow[] {
  const position = new Map(productIds.map((id, index) => [id, index]));
  const licensed = features.filter((feature) => position.has(feature.productId));
  return licensed.sort((a, b) => (position.get(a.productId) ?? 0) - (position.get(b.productId) ?? 0));
}

/** The claims of a license for a session with this lease: features as the rules enable them now. */
export function licenseClaimsFor(license: {
  entitlement: EntitlementRow;
  facts: EntitlementFacts;
  sessionId: string;
  fingerprint: string;
  lease: { leaseExpiresAt: Date; graceEndsAt: Date };
  features: EntitlementFeatureRow[];
  trial: boolean;
  now: Date;
}): LicenseClaims {
  const { entitlement, facts, lease, trial, now } = license;
  const licensed = licensedFeatures(license.features, facts.productIds).map(featureFacts);
  // An inactive subscription that let the license run is under softEnforcement: in grace.
  const inGrace = subscriptionInactive(facts.policy);
  const features = firstPerKey(enabledFeatures(licensed, { trial, inGrace }, now));
  return buildLicenseClaims({
    providerId: entitlement.providerId,
    entitlementId: entitlement.id,
    sessionId: license.sessionId,
    issuedAt: now,
    leaseEndsAt: lease.leaseExpiresAt,
    graceEndsAt: lease.graceEndsAt,
    productIds: facts.productIds,
    features: featureClaims(features),
    featureExpirations: featureExpirations(features),
    offlineAllowed: facts.policy?.claimBasedActivation?.allowOffLineUse ?? false,
    trial,
    fingerprint: license.fingerprint,
  });
}
