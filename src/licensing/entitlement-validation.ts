import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import {
  type ActivationPolicy,
  type ConvertToTemplateRequest,
  type CreateFromTemplateRequest,
  type EntitlementFeatureUpdate,
  type EntitlementParameters,
  RequiredAuthenticationLevelSchema,
  type UpdateEntitlementRequest,
} from "../../gen/provision/v1/entitlement_pb.js";
import { checkDuration, checkStoredDate, checkTimestamp } from "../catalog/catalog-validation.js";
import { DomainError } from "../platform/errors.js";
import { isEmailAddress, isUuid, type Violations } from "../platform/validation.js";
import { parseRenewPeriod } from "./subscription-periods.js";

/** Lengths of the entitlement columns (0003-licensing.ts); text columns are capped at `text`. */
export const ENTITLEMENT_LIMITS = {
  name: 255,
  version: 64,
  email: 320,
  contactName: 255,
  customerId: 36,
  licenseKey: 255,
  orderId: 255,
  reference: 255,
  /** description, legalNoticeHtml and a feature's value. */
  text: 65_535,
  /** Host names in requireAclHostNameMember (the proto's max_items) and each one's length. */
  hostNames: 100,
  hostName: 253,
  fingerprintingMethod: 64,
  /** productIds of one entitlement (the proto's max_items). */
  products: 100,
  /** features[] of one update (the proto's max_items). */
  featureUpdates: 1000,
} as const;

/** The text fields shared by the create parameters and the update request. */
interface EntitlementText {
  name?: string;
  description?: string;
  version?: string;
  legalNoticeHtml?: string;
  customerContactEmail?: string;
  customerContactName?: string;
  customerId?: string;
  licenseKey?: string;
  orderId?: string;
  reference?: string;
  expirationDateTime?: Timestamp;
  activationPolicy?: ActivationPolicy;
}

/** Checks CreateEntitlement's body (and CreateFromTemplate's entitlementParameters, under `prefix`). */
export function checkEntitlementParameters(violations: Violations, prefix: string, parameters: EntitlementParameters) {
  checkEntitlementText(violations, prefix, parameters);
  const productIds = parameters.productIds;
  if (productIds.length > ENTITLEMENT_LIMITS.products) {
    violations.add(
      `${prefix}productIds`,
      `holds ${productIds.length} items; at most ${ENTITLEMENT_LIMITS.products} are allowed`,
    );
    return;
  }
  const seen = new Set<string>();
  for (const [index, id] of productIds.entries()) {
    const field = `${prefix}productIds[${index}]`;
    if (!isUuid(id)) violations.add(field, "must be a UUID");
    else if (seen.has(id.toLowerCase())) violations.add(field, "names a product listed before");
    seen.add(id.toLowerCase());
  }
  if (parameters.isTemplateForNewEntitlements && parameters.licenseKey.trim() !== "") {
    violations.add(`${prefix}licenseKey`, "must be empty on a template (each entitlement made from it gets its own)");
  }
}

export function checkUpdate(violations: Violations, request: UpdateEntitlementRequest): void {
  checkEntitlementText(violations, "", request);
  if (request.features.length > ENTITLEMENT_LIMITS.featureUpdates) {
    violations.add(
      "features",
      `holds ${request.features.length} items; at most ${ENTITLEMENT_LIMITS.featureUpdates} are allowed`,
    );
    return;
  }
  for (const [index, feature] of request.features.entries())
    checkFeatureUpdate(violations, `features[${index}].`, feature);
}

export function checkConvertToTemplate(violations: Violations, request: ConvertToTemplateRequest): void {
  violations
    .required("templateName", request.templateName)
    .maxLength("templateName", request.templateName, ENTITLEMENT_LIMITS.name)
    .maxLength("templateVersion", request.templateVersion, ENTITLEMENT_LIMITS.version);
}

export function checkCreateFromTemplate(violations: Violations, request: CreateFromTemplateRequest): void {
  if (request.entitlementTemplateId === "" && request.fromEntitlementTemplateName.trim() === "") {
    violations.add("entitlementTemplateId", "is required unless fromEntitlementTemplateName is sent");
  }
  violations
    .uuid("entitlementTemplateId", request.entitlementTemplateId)
    .maxLength("fromEntitlementTemplateName", request.fromEntitlementTemplateName, ENTITLEMENT_LIMITS.name)
    .maxLength("withEntitlementTemplateVersion", request.withEntitlementTemplateVersion, ENTITLEMENT_LIMITS.version);
  if (request.entitlementParameters) {
    checkEntitlementText(violations, "entitlementParameters.", request.entitlementParameters);
  }
}

/** Checks an activation policy as a whole, its fields named under `prefix` (`activationPolicy.`). */
export function checkActivationPolicy(violations: Violations, prefix: string, policy: ActivationPolicy): void {
  violations
    .enumValue(
      `${prefix}requiredAuthenticationLevel`,
      policy.requiredAuthenticationLevel,
      RequiredAuthenticationLevelSchema,
    )
    .uuid(`${prefix}requireOrganizationGroupMember`, policy.requireOrganizationGroupMember);
  checkHostNames(violations, `${prefix}requireAclHostNameMember`, policy.requireAclHostNameMember);
  const claim = policy.claimBasedActivation;
  if (claim) {
    const field = `${prefix}claimBasedActivation.`;
    checkSpan(violations, `${field}leaseTime`, claim.leaseTime);
    checkSpan(violations, `${field}gracePeriod`, claim.gracePeriod);
    if (claim.numberOfSeats < 0) violations.add(`${field}numberOfSeats`, "must be 0 (no limit) or more");
    violations.maxLength(
      `${field}fingerprintingMethod`,
      claim.fingerprintingMethod,
      ENTITLEMENT_LIMITS.fingerprintingMethod,
    );
  }
  const window = policy.timeRestrictedActivationPolicy;
  if (window) {
    const field = `${prefix}timeRestrictedActivationPolicy.`;
    checkTimestamp(violations, `${field}notValidBeforeTimestamp`, window.notValidBeforeTimestamp);
    checkTimestamp(violations, `${field}notValidAfterTimestamp`, window.notValidAfterTimestamp);
    checkWindowOrder(violations, field, window, "notValidBeforeTimestamp");
    checkSpan(violations, `${field}activationPeriod`, window.activationPeriod);
  }
  const trial = policy.trialActivationPolicy;
  if (trial) {
    const field = `${prefix}trialActivationPolicy.`;
    checkSpan(violations, `${field}trialPeriod`, trial.trialPeriod);
    checkTimestamp(violations, `${field}cannotActivateBeforeTimestamp`, trial.cannotActivateBeforeTimestamp);
    checkTimestamp(violations, `${field}notValidAfterTimestamp`, trial.notValidAfterTimestamp);
    checkWindowOrder(violations, field, trial, "cannotActivateBeforeTimestamp");
    checkTimestamp(violations, `${field}trialEndsAt`, trial.trialEndsAt);
  }
  const subscription = policy.subscriptionPolicy;
  if (subscription) {
    const field = `${prefix}subscriptionPolicy.`;
    if (subscription.renewPeriod.trim() !== "")
      checkRenewPeriod(violations, `${field}renewPeriod`, subscription.renewPeriod);
    if (subscription.renewInterval < 0) violations.add(`${field}renewInterval`, "must be 0 (meaning 1) or more");
    if (subscription.subscriptionPeriodsLeft < -1) {
      violations.add(`${field}subscriptionPeriodsLeft`, "must be -1 (until cancelled) or more");
    }
    checkTimestamp(violations, `${field}cannotActivateBeforeTimestamp`, subscription.cannotActivateBeforeTimestamp);
    checkTimestamp(violations, `${field}notValidAfterTimestamp`, subscription.notValidAfterTimestamp);
    checkWindowOrder(violations, field, subscription, "cannotActivateBeforeTimestamp");
    checkTimestamp(violations, `${field}nextRenewalTimeStamp`, subscription.nextRenewalTimeStamp);
  }
}

function checkEntitlementText(violations: Violations, prefix: string, fields: EntitlementText): void {
  const field = (name: string) => `${prefix}${name}`;
  violations
    .maxLength(field("name"), fields.name, ENTITLEMENT_LIMITS.name)
    .maxLength(field("description"), fields.description, ENTITLEMENT_LIMITS.text)
    .maxLength(field("version"), fields.version, ENTITLEMENT_LIMITS.version)
    .maxLength(field("legalNoticeHtml"), fields.legalNoticeHtml, ENTITLEMENT_LIMITS.text)
    .maxLength(field("customerContactName"), fields.customerContactName, ENTITLEMENT_LIMITS.contactName)
    .maxLength(field("licenseKey"), fields.licenseKey, ENTITLEMENT_LIMITS.licenseKey)
    .maxLength(field("orderId"), fields.orderId, ENTITLEMENT_LIMITS.orderId)
    .maxLength(field("reference"), fields.reference, ENTITLEMENT_LIMITS.reference)
    .uuid(field("customerId"), fields.customerId);
  const email = fields.customerContactEmail;
  if (email && !isEmailAddress(email)) violations.add(field("customerContactEmail"), "must be an email address");
  checkStoredDate(violations, field("expirationDateTime"), fields.expirationDateTime);
  if (fields.activationPolicy) checkActivationPolicy(violations, field("activationPolicy."), fields.activationPolicy);
}

function checkFeatureUpdate(violations: Violations, prefix: string, feature: EntitlementFeatureUpdate): void {
  if (feature.id === "" && feature.featureCode.trim() === "")
    violations.add(`${prefix}id`, "or featureCode is required");
  violations
    .uuid(`${prefix}id`, feature.id)
    .maxLength(`${prefix}featureCode`, feature.featureCode, 128)
    .maxLength(`${prefix}value`, feature.value, ENTITLEMENT_LIMITS.text);
  checkStoredDate(violations, `${prefix}featureExpiration`, feature.featureExpiration);
}

type WindowStart = "notValidBeforeTimestamp" | "cannotActivateBeforeTimestamp";

/** A window's `notValidAfterTimestamp` (under `prefix`) must come after its start when both are set. */
function checkWindowOrder(
  violations: Violations,
  prefix: string,
  window: { notValidAfterTimestamp?: Timestamp } & { [start in WindowStart]?: Timestamp },
  startName: WindowStart,
): void {
  const start = window[startName];
  const end = window.notValidAfterTimestamp;
  if (!start || !end) return;
  const endsFirst = end.seconds < start.seconds || (end.seconds === start.seconds && end.nanos <= start.nanos);
  if (endsFirst) violations.add(`${prefix}notValidAfterTimestamp`, `must be later than ${startName}`);
}

/** A date-span of a policy: valid, and not negative. */
function checkSpan(violations: Violations, field: string, span: Duration | undefined): void {
  const before = violations.list.length;
  checkDuration(violations, field, span);
  if (violations.list.length === before && span && (span.seconds < 0n || span.nanos < 0)) {
    violations.add(field, "must not be negative");
  }
}

function checkHostNames(violations: Violations, field: string, hostNames: string[]): void {
  if (hostNames.length > ENTITLEMENT_LIMITS.hostNames) {
    violations.add(field, `holds ${hostNames.length} items; at most ${ENTITLEMENT_LIMITS.hostNames} are allowed`);
    return;
  }
  for (const [index, name] of hostNames.entries()) {
    if (name.trim() === "") violations.add(`${field}[${index}]`, "must not be empty");
    else violations.maxLength(`${field}[${index}]`, name, ENTITLEMENT_LIMITS.hostName);
  }
}

function checkRenewPeriod(violations: Violations, field: string, renewPeriod: string): void {
  try {
    parseRenewPeriod(renewPeriod, field);
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    for (const violation of error.errors) violations.add(violation.field, violation.message);
  }
}
