import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type ActivationInvitation, ActivationInvitationSchema } from "../../gen/provision/v1/entitlement_pb.js";
import type { ActivatedDevice } from "./activation-code-store.js";
import type { ActivationCodeRow } from "./entities.js";
import { levelMeant } from "./entitlement-mapper.js";

/** The stored list of pre-authorized fingerprints (JSON array text, or NULL for none). */
export function preAuthorizedDevicesOf(row: Pick<ActivationCodeRow, "preAuthorizedDevices">): string[] {
  return row.preAuthorizedDevices ? (JSON.parse(row.preAuthorizedDevices) as string[]) : [];
}

export function preAuthorizedDevicesText(devices: string[]): string | null {
  return devices.length > 0 ? JSON.stringify(devices) : null;
}

/**
 * The invitation record of a code: registeredFingerprints are the pre-authorized devices, then the devices
 * activated with it (`devices`), each once.
 */
export function toActivationInvitation(
  row: ActivationCodeRow,
  devices: readonly ActivatedDevice[],
): ActivationInvitation {
  const preAuthorized = preAuthorizedDevicesOf(row);
  const registered = new Set([...preAuthorized, ...devices.map((device) => device.fingerprint)]);
  return create(ActivationInvitationSchema, {
    id: row.id,
    userId: row.userId,
    email: row.email,
    activationRequiresValidDeviceId: preAuthorized.length > 0 || row.fingerprint !== "",
    organizationGroupId: row.organizationGroupId,
    activationCode: row.code,
    fingerprint: row.fingerprint,
    registeredFingerprints: [...registered],
    maxDeviceActivations: row.maxDeviceActivations,
    userConsent: row.userConsent,
    requiresUserConsent: row.requiresUserConsent,
    sendUserNotification: row.sendUserNotification,
    entitlementId: row.entitlementId,
    activationTimeStamp: row.activationTimeStamp ? timestampFromDate(row.activationTimeStamp) : undefined,
    expirationTimeStamp: row.expirationTimeStamp ? timestampFromDate(row.expirationTimeStamp) : undefined,
    createdAt: timestampFromDate(row.createdAt),
    verificationCodeUseCount: row.verificationCodeUseCount,
    maxVerificationCodeUseCount: row.maxVerificationCodeUseCount,
    activationCodeUseCount: row.activationCodeUseCount,
    maxActivationCodeUseCount: row.maxActivationCodeUseCount,
    isTrialActivation: row.isTrialActivation,
    useEntitlementMaxActivations: row.useEntitlementMaxActivations,
    isDeleted: row.isDeleted,
    requiredAuthenticationLevel: levelMeant(row.requiredAuthenticationLevel),
  });
}
