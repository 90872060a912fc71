import type { EntityManager } from "typeorm";
import { dialectOf } from "../platform/database.js";
import { type EntitlementRow, SESSION_STATE } from "./entities.js";
import { policyOf } from "./entitlement-mapper.js";
import type { SessionStore } from "./session-store.js";

/** What an entitlement's seats are held by: floating sessions, node-locked devices, or nothing counted. */
export type SeatKind = "floating" | "node-locked" | "none";

export function seatKindOf(row: Pick<EntitlementRow, "activationPolicy">): SeatKind {
  const claim = policyOf(row)?.claimBasedActivation;
  if (!claim) return "none";
  return claim.isFloatingLicense ? "floating" : "node-locked";
}

/**
 * Counts an entitlement's seats anew when its policy switches what holds them (under the entitlement's row
 * lock, in the transaction that changes the policy): each kind keeps its own count, so the live sessions
 * activated under the other kind, or with no seats counted at all, would otherwise hold none, and a limit would
 * let that many more in. Floating: every live session whose grace is not over holds a seat. Node-locked: every
 * device with such a session holds one, beside the devices that held one already.
 */
export async function recountSeatsForKind(
  manager: EntityManager,
  store: SessionStore,
  change: { entitlementId: string; before: SeatKind; after: SeatKind; now: Date },
): Promise<void> {
  const { entitlementId, before, after, now } = change;
  if (before === after || after === "none") return;
  if (after === "floating") await holdFloatingSeats(manager, store, entitlementId, now);
  else await holdDevices(manager, store, entitlementId, now);
}

async function holdFloatingSeats(manager: EntityManager, store: SessionStore, entitlementId: string, now: Date) {
  await manager.query(
    "UPDATE license_sessions SET holds_floating_seat = CASE WHEN state = ? AND grace_ends_at > ? THEN 1 ELSE 0 END, is_floating = CASE WHEN state = ? THEN 1 ELSE is_floating END WHERE entitlement_id = ? AND (state = ? OR holds_floating_seat = 1)",
    [SESSION_STATE.live, store.date(now), SESSION_STATE.live, entitlementId, SESSION_STATE.live],
  );
  await manager.query("DELETE FROM floating_seat_counts WHERE entitlement_id = ?", [entitlementId]);
  await manager.query(
    "INSERT INTO floating_seat_counts (entitlement_id, held, earliest_end) SELECT ?, COUNT(*), MIN(grace_ends_at) FROM license_sessions WHERE entitlement_id = ? AND holds_floating_seat = 1",
    [entitlementId, entitlementId],
  );
}

async function holdDevices(manager: EntityManager, store: SessionStore, entitlementId: string, now: Date) {
  const unlessPresent =
    dialectOf(manager.connection) === "mysql"
      ? "ON DUPLICATE KEY UPDATE fingerprint_hash = entitlement_devices.fingerprint_hash"
      : "ON CONFLICT DO NOTHING";
  await manager.query(
    `INSERT INTO entitlement_devices (entitlement_id, fingerprint_hash, fingerprint, created_at, activation_code_id) SELECT entitlement_id, fingerprint_hash, MIN(fingerprint), ?, MIN(activation_code_id) FROM license_sessions WHERE entitlement_id = ? AND state = ? AND grace_ends_at > ? GROUP BY entitlement_id, fingerprint_hash ${unlessPresent}`,
    [store.date(now), entitlementId, SESSION_STATE.live, store.date(now)],
  );
  await manager.query("DELETE FROM entitlement_device_counts WHERE entitlement_id = ?", [entitlementId]);
  await manager.query(
    "INSERT INTO entitlement_device_counts (entitlement_id, held) SELECT ?, COUNT(*) FROM entitlement_devices WHERE entitlement_id = ?",
    [entitlementId, entitlementId],
  );
  // Floating seats no longer limit anything: the sessions holding one give it back with the count.
  // The live sessions are node-locked now: renew, release and EndSession treat them as such.
  await manager.query(
    "UPDATE license_sessions SET holds_floating_seat = 0, is_floating = 0 WHERE entitlement_id = ? AND (holds_floating_seat = 1 OR state = ?)",
    [entitlementId, SESSION_STATE.live],
  );
  await manager.query("UPDATE floating_seat_counts SET held = 0, earliest_end = NULL WHERE entitlement_id = ?", [
    entitlementId,
  ]);
}
