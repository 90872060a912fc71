import { clone, create, fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Product } from "../../gen/provision/v1/catalog_pb.js";
import {
  type ActivationPolicy,
  ActivationPolicySchema,
  type Entitlement,
  type EntitlementFeature,
  EntitlementFeatureSchema,
  EntitlementSchema,
  RequiredAuthenticationLevel,
} from "../../gen/provision/v1/entitlement_pb.js";
import type { EntitlementFeatureRow, EntitlementRow } from "./entities.js";
import { addMs, durationMs } from "./policy-time.js";

export function toEntitlement(
  row: EntitlementRow,
  products: Product[],
  features: EntitlementFeatureRow[],
): Entitlement {
  return create(EntitlementSchema, {
    id: row.id,
    name: row.name,
    description: row.description ?? "",
    version: row.version,
    legalNoticeHtml: row.legalNoticeHtml ?? "",
    customerContactEmail: row.customerContactEmail,
    customerContactName: row.customerContactName,
    customerId: row.customerId,
    allowLicenseActivation: row.allowLicenseActivation,
    licenseKey: row.licenseKey ?? "",
    expirationDateTime: row.expirationDateTime ? timestampFromDate(row.expirationDateTime) : undefined,
    isEntitlementTrial: row.isEntitlementTrial,
    isRevoked: row.isRevoked,
    isTemplateForNewEntitlements: row.isTemplate,
    products,
    features: features.map(toEntitlementFeature),
    activationPolicy: policyOf(row),
    orderId: row.orderId,
    reference: row.reference,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

export function toEntitlementFeature(row: EntitlementFeatureRow): EntitlementFeature {
  return create(EntitlementFeatureSchema, {
    id: row.id,
    featureCode: row.featureCode ?? "",
    productId: row.productId,
    moduleName: row.moduleName,
    featurePath: row.featurePath,
    name: row.name,
    description: row.description ?? "",
    value: row.value ?? "",
    version: row.version,
    isEnabled: row.isEnabled,
    isAvailableDuringTrialPeriod: row.isAvailableDuringTrialPeriod,
    isAvailableDuringGracePeriod: row.isAvailableDuringGracePeriod,
    canModifyValueOnEntitlement: row.canModifyValueOnEntitlement,
    meteredAssetId: row.meteredAssetId ?? "",
    featureExpiration: row.featureExpiration ? timestampFromDate(row.featureExpiration) : undefined,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

/**
 * The stored activation policy, or undefined when there is none; its authentication level as the contract allows
 * it (a policy stored before 2026-11-29 may leave it unset).
 */
export function policyOf(row: Pick<EntitlementRow, "activationPolicy">): ActivationPolicy | undefined {
  if (!row.activationPolicy) return undefined;
  const policy = fromJsonString(ActivationPolicySchema, row.activationPolicy);
  policy.requiredAuthenticationLevel = levelMeant(policy.requiredAuthenticationLevel);
  return policy;
}

/** The policy as stored, its authentication level as the contract allows it. */
export function policyText(policy: ActivationPolicy | undefined): string | null {
  if (!policy) return null;
  if (policy.requiredAuthenticationLevel !== RequiredAuthenticationLevel.UNSPECIFIED) {
    return toJsonString(ActivationPolicySchema, policy);
  }
  const meant = clone(ActivationPolicySchema, policy);
  meant.requiredAuthenticationLevel = RequiredAuthenticationLevel.ACTIVATION_CODE;
  return toJsonString(ActivationPolicySchema, meant);
}

/** The level an authentication level means: unset (0) is ActivationCode (1), as the contract allows only 1–3. */
export function levelMeant(level: RequiredAuthenticationLevel): RequiredAuthenticationLevel {
  return level === RequiredAuthenticationLevel.UNSPECIFIED ? RequiredAuthenticationLevel.ACTIVATION_CODE : level;
}

/**
 * The policy as a trial entitlement created at `createdAt` holds it: a trial whose period starts at creation
 * ends `trialPeriod` after it (unless an end is set already). Other policies are answered unchanged.
 */
export function withTrialEnd(
  policy: ActivationPolicy | undefined,
  isTrial: boolean,
  createdAt: Date,
): ActivationPolicy | undefined {
  const trial = policy?.trialActivationPolicy;
  const periodMs = durationMs(trial?.trialPeriod);
  if (!policy || !trial || !isTrial || periodMs === null) return policy;
  if (trial.trialPeriodStartsAfterFirstActivation || trial.trialEndsAt) return policy;
  const next = clone(ActivationPolicySchema, policy);
  if (next.trialActivationPolicy)
    next.trialActivationPolicy.trialEndsAt = timestampFromDate(addMs(createdAt, periodMs));
  return next;
}

/** The policy without the trial end the service set: what a template or a fresh copy starts from. */
export function withoutTrialEnd(policy: ActivationPolicy | undefined): ActivationPolicy | undefined {
  if (!policy?.trialActivationPolicy?.trialEndsAt) return policy;
  const next = clone(ActivationPolicySchema, policy);
  if (next.trialActivationPolicy) next.trialActivationPolicy.trialEndsAt = undefined;
  return next;
}
