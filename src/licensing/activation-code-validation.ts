import {
  type ActivationInvitationParameters,
  RequiredAuthenticationLevel,
  RequiredAuthenticationLevelSchema,
} from "../../gen/provision/v1/entitlement_pb.js";
import { checkTimestamp } from "../catalog/catalog-validation.js";
import { storedDate } from "../catalog/product-mapper.js";
import { isEmailAddress, type Violations } from "../platform/validation.js";
import { vendorCodeProblem } from "./activation-code-format.js";

/** Pre-authorized device fingerprints per code (as the proto's max_items). */
export const MAX_PRE_AUTHORIZED_DEVICES = 1000;
export const MAX_FINGERPRINT_LENGTH = 512;

/** Checks an invitation request; field names are JSON names after `prefix`. */
export function checkInvitationParameters(
  violations: Violations,
  prefix: string,
  parameters: ActivationInvitationParameters,
  now: Date,
  policyLevel: RequiredAuthenticationLevel,
): void {
  const field = (name: string) => `${prefix}${name}`;
  violations
    .enumValue(
      field("requiredAuthenticationLevel"),
      parameters.requiredAuthenticationLevel,
      RequiredAuthenticationLevelSchema,
    )
    .maxLength(field("fingerprint"), parameters.fingerprint, MAX_FINGERPRINT_LENGTH)
    .uuid(field("userId"), parameters.userId)
    .uuid(field("organizationGroupId"), parameters.organizationGroupId);
  checkDevices(violations, field("preAuthorizedDevices"), parameters.preAuthorizedDevices);
  if (parameters.maxDeviceActivations < 0) violations.add(field("maxDeviceActivations"), "must be 0 or more");
  if (parameters.maxActivationCodeUseCount < 0) violations.add(field("maxActivationCodeUseCount"), "must be 0 or more");
  checkEmail(violations, field("email"), parameters, policyLevel);
  // Only a code not sent is generated: one of blanks alone is refused, as a code of dashes alone is.
  const codeProblem = parameters.activationCode === "" ? null : vendorCodeProblem(parameters.activationCode.trim());
  if (codeProblem) violations.add(field("activationCode"), codeProblem);
  checkExpiration(violations, field("expirationTimeStamp"), parameters, now);
}

function checkDevices(violations: Violations, field: string, devices: string[]): void {
  if (devices.length > MAX_PRE_AUTHORIZED_DEVICES) {
    violations.add(field, `holds ${devices.length} items; at most ${MAX_PRE_AUTHORIZED_DEVICES} are allowed`);
    return;
  }
  for (const [index, device] of devices.entries()) {
    if (device.trim() === "") violations.add(`${field}[${index}]`, "must not be empty");
    else violations.maxLength(`${field}[${index}]`, device, MAX_FINGERPRINT_LENGTH);
  }
}

function checkEmail(
  violations: Violations,
  field: string,
  parameters: ActivationInvitationParameters,
  policyLevel: RequiredAuthenticationLevel,
): void {
  if (parameters.email !== "" && !isEmailAddress(parameters.email)) {
    violations.add(field, "must be an email address");
  } else if (parameters.email === "") {
    if (parameters.requiredAuthenticationLevel === RequiredAuthenticationLevel.EMAIL) {
      violations.add(field, "is required at requiredAuthenticationLevel 2 (Email)");
    } else if (
      policyLevel === RequiredAuthenticationLevel.EMAIL &&
      parameters.requiredAuthenticationLevel < RequiredAuthenticationLevel.EMAIL
    ) {
      violations.add(field, "is required: the entitlement's policy asks for requiredAuthenticationLevel 2 (Email)");
    } else if (parameters.sendUserNotification) {
      violations.add(field, "is required with sendUserNotification");
    }
  }
}

function checkExpiration(
  violations: Violations,
  field: string,
  parameters: ActivationInvitationParameters,
  now: Date,
): void {
  const before = violations.list.length;
  checkTimestamp(violations, field, parameters.expirationTimeStamp);
  if (violations.list.length > before || !parameters.expirationTimeStamp) return;
  if (storedDate(parameters.expirationTimeStamp) <= now) violations.add(field, "must be later than now");
}
