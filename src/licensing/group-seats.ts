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
  deviceKey,
  ENTITLEMENT_DEVICES,
  type OwnedDevices,
  type SessionStore,
} from "./session-store.js";

/** A device count as a group reads it: the owner's count and which of the group's devices it holds. */
interface DeviceTally {
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
  entitlementId: string;
  /** The device's fingerprint hash. */
  hash: string;
}

/**
 * The seats and device limits of a group's activations, as `seatCheck` counts them for one: read once under the
 * entitlements' locks (what the activations' seat plans say they need, one statement for each kind of count
 * whatever the number of entitlements and codes), counted in memory as each activation is taken, written
 * together. An activation whose seat needs what was not read runs alone.
 */
export class GroupSeats {
  private readonly floating = new Map<string, FloatingSeatCount>();
  private readonly floatingTaken = new Set<string>();
  private readonly entitlementDevices = new Map<string, DeviceTally>();
  private readonly codeDevices = new Map<string, DeviceTally>();
  /** Devices of codes that use the entitlement's seats: recorded once each, not counted. */
  private readonly recorded: DeviceToAdd[] = [];
  private readonly loads: { statements: Statement[]; load: (results: unknown[]) => void }[] = [];

  constructor(
    private readonly store: SessionStore,
    asks: SeatAsk[],
  ) {
    const floatingIds = new Set(asks.filter(({ plan }) => plan.claim?.isFloatingLicense).map(entitlementOfAsk));
    if (floatingIds.size > 0) this.readFloating([...floatingIds]);
    const nodeLocked = asks.filter(({ plan }) => plan.claim && !plan.claim.isFloatingLicense);
    this.readTallies(ENTITLEMENT_DEVICES, devicesByOwner(nodeLocked, entitlementOfAsk), this.entitlementDevices);
    const ownLimit = asks.filter(({ plan }) => !plan.code.useEntitlementMaxActivations);
    this.readTallies(
      CODE_DEVICES,
      devicesByOwner(ownLimit, ({ plan }) => plan.code.id),
      this.codeDevices,
    );
  }

  /** What the group reads for its seats, sent after the locking reads of the entitlements, codes and sessions. */
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
   * Whether what was read decides this device's seat on the entitlement with this code and claim, as of `now`:
   * if not, the activation runs alone.
   */
  decides(entitlementId: string, code: ActivationCodeRow, claim: Claim, fingerprintHash: string, now: Date): boolean {
    const codeTally = this.codeDevices.get(code.id);
    if (!code.useEntitlementMaxActivations && !codeTally?.read.has(fingerprintHash)) return false;
    if (claim?.isFloatingLicense) {
      // A held seat whose grace may be over is found and taken back by the single activation.
      const count = this.floating.get(entitlementId);
      return count !== undefined && !mayHaveLapsed(count, now);
    }
    return !claim || this.entitlementDevices.get(entitlementId)?.read.has(fingerprintHash) === true;
  }

  /**
   * Takes the device's seat on the entitlement and its place among the code's devices, or throws the 409 the
   * single activation would (the code's limit first); counts nothing when it throws.
   */
  take(
    entitlementId: string,
    code: ActivationCodeRow,
    claim: Claim,
    device: Omit<DeviceToAdd, "ownerId">,
    graceEndsAt: Date,
  ): void {
    const codeTally = code.useEntitlementMaxActivations ? undefined : this.codeDevices.get(code.id);
    if (codeTally && isFull(codeTally, device.fingerprintHash, codeDeviceLimit(code))) {
      throw deviceLimit(codeDeviceLimit(code));
    }
    const seats = claim?.numberOfSeats ?? 0;
    const nodeLocked = claim && !claim.isFloatingLicense ? this.entitlementDevices.get(entitlementId) : undefined;
    if (nodeLocked && isFull(nodeLocked, device.fingerprintHash, seats)) throw seatLimit(seats);
    const floating = claim?.isFloatingLicense ? this.floating.get(entitlementId) : undefined;
    if (floating) this.takeFloating(entitlementId, floating, seats, graceEndsAt);
    if (codeTally) addTo(codeTally, device);
    else this.recorded.push({ ...device, ownerId: code.id });
    if (nodeLocked) addTo(nodeLocked, device);
  }

  /** The rows the taken seats and devices write: one statement for each kind of row. */
  writes(): Statement[] {
    const { store } = this;
    const floating = new Map([...this.floatingTaken].map((id) => [id, this.floating.get(id) as FloatingSeatCount]));
    return [
      ...(floating.size > 0 ? [store.floatingSeats.storeStatement(floating)] : []),
      ...this.tallyWrites(ENTITLEMENT_DEVICES, this.entitlementDevices),
      ...this.tallyWrites(CODE_DEVICES, this.codeDevices),
      ...(this.recorded.length > 0 ? [store.addDevicesOnceStatement(CODE_DEVICES, this.recorded)] : []),
    ];
  }

  private takeFloating(entitlementId: string, count: FloatingSeatCount, seats: number, graceEndsAt: Date): void {
    if (allTaken(count.held, seats)) throw seatLimit(seats);
    count.held += 1;
    count.earliestEnd = earliest(count.earliestEnd, graceEndsAt);
    this.floatingTaken.add(entitlementId);
  }

  private tallyWrites(table: DeviceTable, tallies: Map<string, DeviceTally>): Statement[] {
    const grown = [...tallies.values()].filter((tally) => tally.added.length > 0);
    if (grown.length === 0) return [];
    const counts = grown.map((tally) => ({ ownerId: tally.ownerId, added: tally.added.length }));
    const added = grown.flatMap((tally) => tally.added);
    return [this.store.addDevicesStatement(table, added), this.store.countDevicesStatement(table, counts)];
  }

  private readFloating(entitlementIds: string[]): void {
    const counts = this.store.floatingSeats;
    this.loads.push({
      statements: [counts.countsStatement(entitlementIds)],
      load: ([result]) => {
        for (const [id, count] of counts.countsOf(result, entitlementIds)) this.floating.set(id, count);
      },
    });
  }

  private readTallies(table: DeviceTable, owned: OwnedDevices[], into: Map<string, DeviceTally>): void {
    if (owned.length === 0) return;
    const { store } = this;
    const ownerIds = owned.map((devices) => devices.ownerId);
    this.loads.push({
      statements: [store.deviceCountStatement(table, ownerIds), store.ownedDevicesStatement(table, owned)],
      load: ([counts, rows]) => {
        const held = store.heldByOwnerOf(counts);
        const present = store.deviceKeysOf(rows, table.owner);
        for (const { ownerId, hashes } of owned) {
          into.set(ownerId, {
            ownerId,
            held: held.get(ownerId) ?? 0,
            present: new Set(hashes.filter((hash) => present.has(deviceKey(ownerId, hash)))),
            read: new Set(hashes),
            added: [],
          });
        }
      },
    });
  }
}

export function entitlementOfAsk(ask: SeatAsk): string {
  return ask.entitlementId;
}

/** The asks' distinct devices, by the owner (`ownerOf`) whose rows they are looked for among. */
export function devicesByOwner(asks: SeatAsk[], ownerOf: (ask: SeatAsk) => string): OwnedDevices[] {
  const byOwner = new Map<string, Set<string>>();
  for (const ask of asks) {
    const owner = ownerOf(ask);
    byOwner.set(owner, (byOwner.get(owner) ?? new Set()).add(ask.hash));
  }
  return [...byOwner].map(([ownerId, hashes]) => ({ ownerId, hashes: [...hashes] }));
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
