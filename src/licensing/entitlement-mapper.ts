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
    activationPolicy: shownPolicyOf(row),
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

function shownPolicyOf(row: Pick<EntitlementRow, "activationPolicy">): ActivationPolicy | undefined {
  const policy = policyOf(row);
  return policy && withLevelShown(policy);
}

/** The stored activation policy, or undefined when there is none. */
export function policyOf(row: Pick<EntitlementRow, "activationPolicy">): ActivationPolicy | undefined {
  return row.activationPolicy ? fromJsonString(ActivationPolicySchema, row.activationPolicy) : undefined;
}

/** The policy as stored: an unset authentication level is stored as the level it means, ActivationCode (1). */
export function policyText(policy: ActivationPolicy | undefined): string | null {
  return policy ? toJsonString(ActivationPolicySchema, withLevelShown(policy)) : null;
}

/**
 * The policy with its authentication level as the contract allows it (1, 2 or 3): an unset level (0, from a
 * client or a policy stored before) means ActivationCode (1).
 */
function withLevelShown(policy: ActivationPolicy): ActivationPolicy {
  if (policy.requiredAuthenticationLevel !== RequiredAuthenticationLevel.UNSPECIFIED) return policy;
  const shown = clone(ActivationPolicySchema, policy);
  shown.requiredAuthenticationLevel = RequiredAuthenticationLevel.ACTIVATION_CODE;
  return shown;
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
