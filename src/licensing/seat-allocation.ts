import type { ClaimBasedActivation } from "../../gen/provision/v1/entitlement_pb.js";
import { conflict } from "../platform/errors.js";
import type { Statement } from "../platform/statement-batch.js";
import { CODE_DEVICES, ENTITLEMENT_DEVICES, type SessionStore } from "./session-store.js";

export interface SeatRequest {
  entitlementId: string;
  claim: Pick<ClaimBasedActivation, "isFloatingLicense" | "numberOfSeats"> | undefined;
  code: { id: string; maxDeviceActivations: number; useEntitlementMaxActivations: boolean };
  fingerprint: string;
  fingerprintHash: string;
  now: Date;
}

/** A seat decision in two steps, so that an activation can batch its statements. */
export interface SeatCheck {
  /** What the decision reads; run after the device's earlier live sessions were ended. */
  reads: Statement[];
  /** From the reads' results, in their order: the rows to add for the seat, or a 409 thrown. */
  decide(results: unknown[]): Statement[];
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
export function seatCheck(store: SessionStore, request: SeatRequest): SeatCheck {
  const code = codeDevicesCheck(store, request);
  const seat = entitlementSeatCheck(store, request);
  return {
    reads: [...code.reads, ...seat.reads],
    decide: (results) => [
      ...code.decide(results.slice(0, code.reads.length)),
      ...seat.decide(results.slice(code.reads.length)),
    ],
  };
}

function codeDevicesCheck(store: SessionStore, request: SeatRequest): SeatCheck {
  const device = deviceOf(request, request.code.id);
  if (request.code.useEntitlementMaxActivations) {
    return { reads: [store.addDeviceOnceStatement(CODE_DEVICES, device)], decide: () => [] };
  }
  const limit = Math.max(request.code.maxDeviceActivations, 1);
  return {
    reads: [store.deviceCountsStatement(CODE_DEVICES, request.code.id, request.fingerprintHash, limit)],
    decide: ([counts]) => {
      const { count, present } = store.deviceCountsOf(counts);
      if (present) return [];
      if (count >= limit) {
        throw conflict(
          `this activation code has already activated its ${limit} device${limit === 1 ? "" : "s"}`,
          "device-limit-reached",
        );
      }
      return [store.addDeviceStatement(CODE_DEVICES, device)];
    },
  };
}

function entitlementSeatCheck(store: SessionStore, request: SeatRequest): SeatCheck {
  const seats = request.claim?.numberOfSeats ?? 0;
  if (request.claim?.isFloatingLicense) {
    if (seats <= 0) return { reads: [], decide: () => [] };
    return {
      reads: [store.liveFloatingSessionsStatement(request.entitlementId, request.now)],
      decide: ([live]) => {
        if (store.countOf(live) >= seats) throw seatLimit(seats);
        return [];
      },
    };
  }
  if (!request.claim) return { reads: [], decide: () => [] };
  const owner = request.entitlementId;
  return {
    reads: [store.deviceCountsStatement(ENTITLEMENT_DEVICES, owner, request.fingerprintHash, seats)],
    decide: ([counts]) => {
      const { count, present } = store.deviceCountsOf(counts);
      if (present) return [];
      if (seats > 0 && count >= seats) throw seatLimit(seats);
      return [store.addDeviceStatement(ENTITLEMENT_DEVICES, deviceOf(request, owner))];
    },
  };
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
