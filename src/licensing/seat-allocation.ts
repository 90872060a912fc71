import type { ClaimBasedActivation } from "../../gen/provision/v1/entitlement_pb.js";
import { conflict } from "../platform/errors.js";
import type { Statement } from "../platform/statement-batch.js";
import { mayHaveLapsed } from "./floating-seat-counts.js";
import { earliest } from "./policy-time.js";
import { CODE_DEVICES, ENTITLEMENT_DEVICES, type SessionStore } from "./session-store.js";

export interface SeatRequest {
  entitlementId: string;
  claim: Pick<ClaimBasedActivation, "isFloatingLicense" | "numberOfSeats"> | undefined;
  code: { id: string; maxDeviceActivations: number; useEntitlementMaxActivations: boolean };
  fingerprint: string;
  fingerprintHash: string;
  now: Date;
}

/** What a decision learns after its reads were sent. */
export interface SeatDecision {
  /** Sends statements in the activation's transaction, for what a decision must read (and write) first. */
  run: (statements: Statement[]) => Promise<unknown[]>;
  /** When the new session's grace ends. */
  graceEndsAt: Date;
  /** The device's earlier sessions holding a floating seat, which the activation ends. */
  endingSeats: string[];
}

/** A seat decision in two steps, so that an activation can batch its statements. */
export interface SeatCheck {
  /** What the decision reads; run with the device's earlier live sessions locked (they end with the writes). */
  reads: Statement[];
  /** From the reads' results, in their order: the rows to write for the seat, or a 409 thrown. */
  decide(results: unknown[], decision: SeatDecision): Promise<Statement[]>;
}

/**
 * Takes a seat for a device, or refuses with 409. Runs inside the activation's transaction, after the
 * entitlement's row was locked (as every change to a count locks it first), so every count is exact.
 * - Floating: live sessions (lease + grace not over) are the seats in use, as counted in floating_seat_counts.
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
    decide: async (results, decision) => [
      ...(await code.decide(results.slice(0, code.reads.length), decision)),
      ...(await seat.decide(results.slice(code.reads.length), decision)),
    ],
  };
}

function codeDevicesCheck(store: SessionStore, request: SeatRequest): SeatCheck {
  const device = deviceOf(request, request.code.id);
  if (request.code.useEntitlementMaxActivations) {
    return { reads: [store.addDeviceOnceStatement(CODE_DEVICES, device)], decide: async () => [] };
  }
  const limit = codeDeviceLimit(request.code);
  return {
    reads: [store.deviceCountsStatement(CODE_DEVICES, request.code.id, request.fingerprintHash)],
    decide: async ([counts]) => {
      const { count, present } = store.deviceCountsOf(counts);
      if (present) return [];
      if (allTaken(count, limit)) throw deviceLimit(limit);
      return [
        store.addDeviceStatement(CODE_DEVICES, device),
        store.countDeviceStatement(CODE_DEVICES, request.code.id),
      ];
    },
  };
}

function entitlementSeatCheck(store: SessionStore, request: SeatRequest): SeatCheck {
  const seats = request.claim?.numberOfSeats ?? 0;
  if (request.claim?.isFloatingLicense) return floatingSeatCheck(store, request, seats);
  if (!request.claim) return { reads: [], decide: async () => [] };
  const owner = request.entitlementId;
  return {
    reads: [store.deviceCountsStatement(ENTITLEMENT_DEVICES, owner, request.fingerprintHash)],
    decide: async ([counts]) => {
      const { count, present } = store.deviceCountsOf(counts);
      if (present) return [];
      if (allTaken(count, seats)) throw seatLimit(seats);
      return [
        store.addDeviceStatement(ENTITLEMENT_DEVICES, deviceOf(request, owner)),
        store.countDeviceStatement(ENTITLEMENT_DEVICES, owner),
      ];
    },
  };
}

/**
 * The seats held, from the entitlement's count (kept with unlimited seats too, for a limit set later): the
 * device's earlier sessions give theirs back (they end in the writes, before the count is written), and so do
 * sessions whose grace is over, looked for only once the count's earliest end has passed.
 */
function floatingSeatCheck(store: SessionStore, request: SeatRequest, seats: number): SeatCheck {
  const { entitlementId, now } = request;
  const counts = store.floatingSeats;
  return {
    reads: [counts.countStatement(entitlementId)],
    decide: async ([result], { run, graceEndsAt, endingSeats }) => {
      const count = counts.countOf(result);
      const looks = mayHaveLapsed(count, now);
      const lapsed = looks ? store.idsOf((await run([counts.lapsedStatement(entitlementId, now)]))[0]) : [];
      const held = count.held - new Set([...endingSeats, ...lapsed]).size;
      // A device activating again in place of a session still holding a seat (its grace not over) adds none: it
      // is let in under a limit lowered below the seats in use, as a node-locked device holding one is.
      const stillHolding = endingSeats.some((id) => !lapsed.includes(id));
      if (!stillHolding && allTaken(held, seats)) throw seatLimit(seats);
      if (looks) {
        const release = lapsed.length > 0 ? [counts.releaseStatement(lapsed)] : [];
        return [...release, counts.recountStatement(entitlementId, held + 1, graceEndsAt)];
      }
      const { earliestEnd } = count;
      const end = earliest(earliestEnd, graceEndsAt);
      return [counts.storeStatement(new Map([[entitlementId, { held: held + 1, earliestEnd: end }]]))];
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

/** Whether `held` seats (or devices) leave none of `limit` (0: no limit). */
export function allTaken(held: number, limit: number): boolean {
  return limit > 0 && held >= limit;
}

/** The distinct devices a code with a limit of its own activates: maxDeviceActivations, 0 meaning 1. */
export function codeDeviceLimit(code: { maxDeviceActivations: number }): number {
  return Math.max(code.maxDeviceActivations, 1);
}

export function deviceLimit(limit: number) {
  return conflict(
    `this activation code has already activated its ${limit} device${limit === 1 ? "" : "s"}`,
    "device-limit-reached",
  );
}

export function seatLimit(seats: number) {
  return conflict(`all ${seats} seat${seats === 1 ? "" : "s"} of this entitlement are in use`, "seat-limit-reached");
}
