import type { ClaimBasedActivation } from "../../gen/provision/v1/entitlement_pb.js";
import type { Statement } from "../platform/statement-batch.js";
import type { ActivationCodeRow } from "./entities.js";
import { type FloatingSeatCount, mayHaveLapsed } from "./floating-seat-counts.js";
import { earliest } from "./policy-time.js";
import { allTaken, codeDeviceLimit, deviceLimit, seatLimit } from "./seat-allocation.js";
import type { SeatPlan } from "./seat-plans.js";
import {
  CODE_DEVICES,
  type DeviceTable,
  type DeviceToAdd,
  ENTITLEMENT_DEVICES,
  type SessionStore,
} from "./session-store.js";

/** A device count as a group reads it: the owner's count and which of the group's devices it holds. */
interface DeviceTally {
  table: DeviceTable;
  ownerId: string;
  held: number;
  present: Set<string>;
  /** The devices whose presence was read. */
  read: Set<string>;
  added: DeviceToAdd[];
}

type Claim = Pick<ClaimBasedActivation, "isFloatingLicense" | "numberOfSeats"> | undefined;

/** An activation of the group, as its seats see it. */
export interface SeatAsk {
  plan: SeatPlan;
  /** The device's fingerprint hash. */
  hash: string;
}

/**
 * The seats and device limits of a group's activations, as `seatCheck` counts them for one: read once under the
 * entitlement's lock (what the activations' seat plans say they need), counted in memory as each activation is
 * taken, written together. An activation whose seat needs what was not read runs alone.
 */
export class GroupSeats {
  private floating: FloatingSeatCount | undefined;
  private floatingTaken = false;
  private entitlementDevices: DeviceTally | undefined;
  private readonly codeDevices = new Map<string, DeviceTally>();
  /** Devices of codes that use the entitlement's seats: recorded once each, not counted. */
  private readonly recorded: DeviceToAdd[] = [];
  private readonly loads: { statements: Statement[]; load: (results: unknown[]) => void }[] = [];

  constructor(
    private readonly store: SessionStore,
    private readonly entitlementId: string,
    asks: SeatAsk[],
  ) {
    const claims = asks.map(({ plan }) => plan.claim);
    if (claims.some((claim) => claim?.isFloatingLicense)) this.readFloating();
    if (claims.some((claim) => claim && !claim.isFloatingLicense)) {
      this.readTally(ENTITLEMENT_DEVICES, entitlementId, asks, (tally) => {
        this.entitlementDevices = tally;
      });
    }
    for (const [codeId, codeAsks] of byOwnLimitCode(asks)) {
      this.readTally(CODE_DEVICES, codeId, codeAsks, (tally) => this.codeDevices.set(codeId, tally));
    }
  }

  /** What the group reads for its seats, sent after the locking reads of the entitlement, codes and sessions. */
  reads(): Statement[] {
    return this.loads.flatMap((part) => part.statements);
  }

  /** Takes the results of `reads`, in their order. */
  load(results: unknown[]): void {
    let next = 0;
    for (const part of this.loads) {
      part.load(results.slice(next, next + part.statements.length));
      next += part.statements.length;
    }
  }

  /**
   * Whether what was read decides this device's seat with this code and claim, as of `now`: if not, the
   * activation runs alone.
   */
  decides(code: ActivationCodeRow, claim: Claim, fingerprintHash: string, now: Date): boolean {
    const codeTally = this.codeDevices.get(code.id);
    if (!code.useEntitlementMaxActivations && !codeTally?.read.has(fingerprintHash)) return false;
    if (claim?.isFloatingLicense) {
      // A held seat whose grace may be over is found and taken back by the single activation.
      return this.floating !== undefined && !mayHaveLapsed(this.floating, now);
    }
    return !claim || this.entitlementDevices?.read.has(fingerprintHash) === true;
  }

  /**
   * Takes the device's seat and its place among the code's devices, or throws the 409 the single activation
   * would (the code's limit first); counts nothing when it throws.
   */
  take(code: ActivationCodeRow, claim: Claim, device: Omit<DeviceToAdd, "ownerId">, graceEndsAt: Date): void {
    const codeTally = code.useEntitlementMaxActivations ? undefined : this.codeDevices.get(code.id);
    if (codeTally && isFull(codeTally, device.fingerprintHash, codeDeviceLimit(code))) {
      throw deviceLimit(codeDeviceLimit(code));
    }
    const seats = claim?.numberOfSeats ?? 0;
    const nodeLocked = claim && !claim.isFloatingLicense ? this.entitlementDevices : undefined;
    if (nodeLocked && isFull(nodeLocked, device.fingerprintHash, seats)) throw seatLimit(seats);
    if (claim?.isFloatingLicense && this.floating) this.takeFloating(this.floating, seats, graceEndsAt);
    if (codeTally) addTo(codeTally, device);
    else this.recorded.push({ ...device, ownerId: code.id });
    if (nodeLocked) addTo(nodeLocked, device);
  }

  /** The rows the taken seats and devices write. */
  writes(): Statement[] {
    const { store } = this;
    const tallies = [...(this.entitlementDevices ? [this.entitlementDevices] : []), ...this.codeDevices.values()];
    return [
      ...(this.floatingTaken && this.floating
        ? [store.floatingSeats.storeStatement(this.entitlementId, this.floating)]
        : []),
      ...tallies
        .filter((tally) => tally.added.length > 0)
        .flatMap((tally) => [
          store.addDevicesStatement(tally.table, tally.added),
          store.countDevicesStatement(tally.table, tally.ownerId, tally.added.length),
        ]),
      ...(this.recorded.length > 0 ? [store.addDevicesOnceStatement(CODE_DEVICES, this.recorded)] : []),
    ];
  }

  private takeFloating(count: FloatingSeatCount, seats: number, graceEndsAt: Date): void {
    if (allTaken(count.held, seats)) throw seatLimit(seats);
    count.held += 1;
    count.earliestEnd = earliest(count.earliestEnd, graceEndsAt);
    this.floatingTaken = true;
  }

  private readFloating(): void {
    const counts = this.store.floatingSeats;
    this.loads.push({
      statements: [counts.countStatement(this.entitlementId)],
      load: ([result]) => {
        this.floating = counts.countOf(result);
      },
    });
  }

  private readTally(table: DeviceTable, ownerId: string, asks: SeatAsk[], loaded: (tally: DeviceTally) => void): void {
    const hashes = [...new Set(asks.map((ask) => ask.hash))];
    this.loads.push({
      statements: [
        this.store.deviceCountStatement(table, ownerId),
        this.store.ownedDevicesStatement(table, ownerId, hashes),
      ],
      load: ([count, owned]) => {
        const present = this.store.fingerprintHashesOf(owned);
        loaded({ table, ownerId, held: this.store.heldOf(count), present, read: new Set(hashes), added: [] });
      },
    });
  }
}

/** The asks whose codes have a device limit of their own, by code id. */
function byOwnLimitCode(asks: SeatAsk[]): Map<string, SeatAsk[]> {
  const byCode = new Map<string, SeatAsk[]>();
  for (const ask of asks) {
    const { code } = ask.plan;
    if (!code.useEntitlementMaxActivations) byCode.set(code.id, [...(byCode.get(code.id) ?? []), ask]);
  }
  return byCode;
}

/** Whether a device the owner does not hold yet would exceed its limit (0: none). */
function isFull(tally: DeviceTally, fingerprintHash: string, limit: number): boolean {
  return !tally.present.has(fingerprintHash) && allTaken(tally.held, limit);
}

function addTo(tally: DeviceTally, device: Omit<DeviceToAdd, "ownerId">): void {
  if (tally.present.has(device.fingerprintHash)) return;
  tally.present.add(device.fingerprintHash);
  tally.held += 1;
  tally.added.push({ ...device, ownerId: tally.ownerId });
}
