import type { CodeFacts, EntitlementFacts, FeatureFacts } from "./activation-rules.js";
import type { ActivationCodeRow, EntitlementFeatureRow, EntitlementRow } from "./entities.js";
import { policyOf } from "./entitlement-mapper.js";
import type { LicensedProduct } from "./session-store.js";

export function entitlementFacts(
  row: EntitlementRow,
  products: LicensedProduct[],
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
    policy: policyOf(row),
    products,
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
    preAuthorizedDevices: row.preAuthorizedDevices ? (JSON.parse(row.preAuthorizedDevices) as string[]) : [],
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
  for (const feature of features) claims[feature.featureCode || feature.id] = feature.value;
  return claims;
}
