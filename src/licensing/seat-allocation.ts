import type { EntityManager } from "typeorm";
import type { ClaimBasedActivation } from "../../gen/provision/v1/entitlement_pb.js";
import { conflict } from "../platform/errors.js";
import { CODE_DEVICES, ENTITLEMENT_DEVICES, type SessionStore } from "./session-store.js";

export interface SeatRequest {
  entitlementId: string;
  claim: ClaimBasedActivation | undefined;
  code: { id: string; maxDeviceActivations: number; useEntitlementMaxActivations: boolean };
  fingerprint: string;
  fingerprintHash: string;
  now: Date;
}

/**
 * Takes a seat for a device, or refuses with 409. Runs inside the activation's transaction, after the
 * entitlement's row was locked and the device's earlier live sessions were ended, so every count is exact.
 * - Floating: live sessions (lease + grace not over) are the seats in use.
 * - Node-locked: each distinct device ever activated holds a seat (until released on a transferable
 *   license, or ended by the vendor); a device that holds one activates again without a second.
 * - The code: the distinct devices ever activated with it, up to maxDeviceActivations (0 means 1), unless it
 *   uses the entitlement's seats instead.
 */
export async function claimSeat(manager: EntityManager, store: SessionStore, request: SeatRequest): Promise<void> {
  await checkCodeDevices(manager, store, request);
  const seats = request.claim?.numberOfSeats ?? 0;
  if (request.claim?.isFloatingLicense) {
    if (seats > 0 && (await store.liveFloatingSessions(manager, request.entitlementId, request.now)) >= seats) {
      throw seatLimit(seats);
    }
    return;
  }
  if (!request.claim) return;
  const owner = request.entitlementId;
  if (await store.hasDevice(manager, ENTITLEMENT_DEVICES, owner, request.fingerprintHash)) return;
  if (seats > 0 && (await store.countDevices(manager, ENTITLEMENT_DEVICES, owner)) >= seats) throw seatLimit(seats);
  await store.addDevice(manager, ENTITLEMENT_DEVICES, deviceOf(request, owner));
}

async function checkCodeDevices(manager: EntityManager, store: SessionStore, request: SeatRequest) {
  const owner = request.code.id;
  if (request.code.useEntitlementMaxActivations) {
    await store.addDeviceOnce(manager, CODE_DEVICES, deviceOf(request, owner));
    return;
  }
  if (await store.hasDevice(manager, CODE_DEVICES, owner, request.fingerprintHash)) return;
  const limit = Math.max(request.code.maxDeviceActivations, 1);
  if ((await store.countDevices(manager, CODE_DEVICES, owner)) >= limit) {
    throw conflict(
      `this activation code has already activated its ${limit} device${limit === 1 ? "" : "s"}`,
      "device-limit-reached",
    );
  }
  await store.addDevice(manager, CODE_DEVICES, deviceOf(request, owner));
}

function deviceOf(request: SeatRequest, ownerId: string) {
  return {
    ownerId,
    fingerprintHash: request.fingerprintHash,
    fingerprint: request.fingerprint,
    activationCodeId: request.code.id,
    now: request.now,
  };
}

function seatLimit(seats: number) {
  return conflict(`all ${seats} seat${seats === 1 ? "" : "s"} of this entitlement are in use`, "seat-limit-reached");
}
