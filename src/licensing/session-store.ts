import type { DataSource, EntityManager } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import { setNewest } from "../platform/bounded-map.js";
import {
  changedRows,
  type Dialect,
  dialectOf,
  forUpdate,
  forUpdateSkipLocked,
  sqlBool,
  sqlGreatest,
  writeSerially,
} from "../platform/database.js";
import { runBatch, type Statement } from "../platform/statement-batch.js";
import {
  EntitlementEntity,
  EntitlementFeatureEntity,
  type EntitlementFeatureRow,
  type EntitlementRow,
  LicenseSessionEntity,
  type LicenseSessionRow,
  SESSION_STATE,
} from "./entities.js";
import { FloatingSeatCounts } from "./floating-seat-counts.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { entitlementFacts } from "./license-facts.js";

/** Codes whose entitlement one instance remembers (see entitlementOfCode). */
const CODE_ENTITLEMENTS_KEPT = 10_000;

/** The entitlement an activation code activates, and its provider. */
export interface CodeOwner {
  entitlementId: string;
  providerId: string;
}

export interface LicensedProduct {
  id: string;
  productCode: string;
  productVersion: string;
}

/** An entitlement's products: their ids, and their codes and versions when read (null when only the ids are known). */
export interface LicensedProducts {
  ids: string[];
  current: LicensedProduct[] | null;
}

/**
 * The SQL of seats and sessions. Every activation locks its entitlement's row first (SELECT … FOR UPDATE on
 * MySQL; SQLite runs one write transaction at a time), so seat counts read under that lock are exact on any
 * number of instances.
 */
export class SessionStore {
  readonly sessions: SqlTable<LicenseSessionRow>;
  private readonly entitlements: SqlTable<EntitlementRow>;
  private readonly features: SqlTable<EntitlementFeatureRow>;
  private readonly dateColumn: ColumnMetadata;
  private readonly forUpdate: string;
  private readonly forUpdateSkipLocked: string;
  private readonly dialect: Dialect;
  private readonly codeEntitlements = new Map<string, CodeOwner>();
  readonly floatingSeats: FloatingSeatCounts;

  constructor(private readonly dataSource: DataSource) {
    this.sessions = new SqlTable(dataSource, LicenseSessionEntity);
    this.entitlements = new SqlTable(dataSource, EntitlementEntity);
    this.features = new SqlTable(dataSource, EntitlementFeatureEntity);
    this.dateColumn = this.sessions.columns.find((column) => column.propertyName === "graceEndsAt") as ColumnMetadata;
    this.dialect = dialectOf(dataSource);
    this.forUpdate = forUpdate(this.dialect);
    this.forUpdateSkipLocked = forUpdateSkipLocked(this.dialect);
    this.floatingSeats = new FloatingSeatCounts(dataSource, this);
  }

  /** A date as the driver stores it, for comparisons in SQL. */
  date(value: Date): unknown {
    return this.dataSource.driver.preparePersistentValue(value, this.dateColumn);
  }

  async lockEntitlement(manager: EntityManager, entitlementId: string): Promise<EntitlementRow | null> {
    const [row] = await this.entitlements.select(manager, `id = ?${this.forUpdate}`, [entitlementId]);
    return row ?? null;
  }

  entitlementStatement(entitlementId: string, lock: boolean): Statement {
    return this.entitlements.selectStatement(`id = ?${lock ? this.forUpdate : ""}`, [entitlementId]);
  }

  /**
   * The entitlements, locked in the order of their ids (as every group takes them, so two never deadlock); with
   * `skipLocked`, those another transaction holds are passed over (MySQL), not waited for.
   */
  entitlementsStatement(entitlementIds: string[], skipLocked = false): Statement {
    const lock = skipLocked ? this.forUpdateSkipLocked : this.forUpdate;
    const where = `id IN (${placeholders(entitlementIds.length)}) ORDER BY id${lock}`;
    return this.entitlements.selectStatement(where, entitlementIds);
  }

  entitlementsOf(result: unknown): EntitlementRow[] {
    return this.entitlements.hydrateAll(result);
  }

  entitlementOf(result: unknown): EntitlementRow | null {
    return this.entitlementsOf(result)[0] ?? null;
  }

  async findEntitlement(manager: EntityManager, entitlementId: string): Promise<EntitlementRow | null> {
    const [row] = await this.entitlements.select(manager, "id = ?", [entitlementId]);
    return row ?? null;
  }

  licensedProductsStatement(entitlementId: string): Statement {
    return {
      sql:
        "SELECT p.id AS id, p.product_code AS code, p.product_version AS version FROM entitlement_products ep " +
        "JOIN products p ON p.id = ep.product_id WHERE ep.entitlement_id = ? ORDER BY ep.position",
      parameters: [entitlementId],
    };
  }

  /** The products licensedProductsStatement read. */
  productsOf(result: unknown): LicensedProducts {
    const rows = result as { id: string; code: string; version: string }[];
    const current = rows.map((row) => ({ id: row.id, productCode: row.code, productVersion: row.version }));
    return { ids: current.map((product) => product.id), current };
  }

  /** The first activation with any of the entitlement's codes; null before it. */
  async firstActivation(manager: EntityManager, entitlementId: string): Promise<Date | null> {
    const { sql, parameters } = this.firstActivationStatement(entitlementId);
    return this.firstActivationOf(await manager.query(sql, parameters));
  }

  firstActivationStatement(entitlementId: string): Statement {
    return {
      sql: "SELECT MIN(activation_time_stamp) AS first FROM activation_codes WHERE entitlement_id = ?",
      parameters: [entitlementId],
    };
  }

  firstActivationOf(result: unknown): Date | null {
    const [row] = result as { first: unknown }[];
    if (!row?.first) return null;
    return this.dataSource.driver.prepareHydratedValue(row.first, this.dateColumn) as Date;
  }

  /**
   * What the policy rules read of an entitlement: its row, products and, when its policy has an end counted from
   * it, first activation; null when absent.
   */
  async entitlementFacts(manager: EntityManager, entitlementId: string) {
    const [rows, products] = await runBatch(manager, [
      this.entitlementStatement(entitlementId, false),
      this.licensedProductsStatement(entitlementId),
    ]);
    const row = this.entitlementOf(rows);
    if (!row) return null;
    const facts = entitlementFacts(row, this.productsOf(products), null);
    if (endsAfterFirstActivation(facts.policy)) {
      facts.firstActivationAt = await this.firstActivation(manager, entitlementId);
    }
    return { row, facts };
  }

  /**
   * The entitlement of the code with this key, and its provider; null when there is none. A code never moves to
   * another entitlement, so the answer is remembered.
   */
  async entitlementOfCode(manager: EntityManager, codeKey: string): Promise<CodeOwner | null> {
    const remembered = this.codeEntitlements.get(codeKey);
    if (remembered !== undefined) return remembered;
    const [row] = (await manager.query("SELECT entitlement_id, provider_id FROM activation_codes WHERE code_key = ?", [
      codeKey,
    ])) as { entitlement_id: string; provider_id: string }[];
    if (!row) return null;
    const owner = { entitlementId: row.entitlement_id, providerId: row.provider_id };
    setNewest(this.codeEntitlements, codeKey, owner, CODE_ENTITLEMENTS_KEPT);
    return owner;
  }

  entitlementFeatures(manager: EntityManager, entitlementId: string): Promise<EntitlementFeatureRow[]> {
    return this.features.select(manager, "entitlement_id = ? ORDER BY created_at, id", [entitlementId]);
  }

  entitlementFeaturesStatement(entitlementId: string): Statement {
    return this.features.selectStatement("entitlement_id = ? ORDER BY created_at, id", [entitlementId]);
  }

  featuresOf(result: unknown): EntitlementFeatureRow[] {
    return this.features.hydrateAll(result);
  }

  storeActivationPolicyStatement(entitlementId: string, policy: string, now: Date): Statement {
    return {
      sql: "UPDATE entitlements SET activation_policy = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
      parameters: [policy, this.date(now), entitlementId],
    };
  }

  /**
   * The live sessions of one device on an entitlement, locked (read by `deviceSessionsOf`): it activates again,
   * and they end with `endSessionsStatement`.
   */
  liveSessionsOfDeviceStatement(entitlementId: string, fingerprintHash: string): Statement {
    return this.liveSessionsOfDevicesStatement([{ ownerId: entitlementId, hashes: [fingerprintHash] }]);
  }

  /**
   * The live sessions of these devices on their entitlements, locked, each with its `entitlement_id` and
   * `fingerprint_hash` (`deviceKeysOf` reads which devices have one where).
   */
  liveSessionsOfDevicesStatement(devices: OwnedDevices[]): Statement {
    const { sql, parameters } = ownedDevicesCondition("entitlement_id", devices);
    return {
      sql: `SELECT id, holds_floating_seat, entitlement_id, fingerprint_hash FROM license_sessions WHERE (${sql}) AND state = ?${this.forUpdate}`,
      parameters: [...parameters, SESSION_STATE.live],
    };
  }

  /** The owner and device of each row read, as `deviceKey` writes them. */
  deviceKeysOf(result: unknown, ownerColumn: string): Set<string> {
    const rows = result as Record<string, string>[];
    return new Set(rows.map((row) => deviceKey(row[ownerColumn], row.fingerprint_hash)));
  }

  /** The ids of the sessions read, and those of them holding a floating seat. */
  deviceSessionsOf(result: unknown): { ids: string[]; holdingSeats: string[] } {
    const rows = result as { id: string; holds_floating_seat: unknown }[];
    const holding = rows.filter((row) => Boolean(Number(row.holds_floating_seat)));
    return { ids: this.idsOf(rows), holdingSeats: this.idsOf(holding) };
  }

  idsOf(result: unknown): string[] {
    return (result as { id: string }[]).map((row) => row.id);
  }

  /** Ends these sessions, giving back their floating seats (the caller counts them in floating_seat_counts). */
  endSessionsStatement(sessionIds: string[], now: Date): Statement {
    return {
      sql: `UPDATE license_sessions SET state = ?, ended_at = ?, holds_floating_seat = ? WHERE id IN (${sessionIds.map(() => "?").join(", ")})`,
      parameters: [SESSION_STATE.ended, this.date(now), this.bool(false), ...sessionIds],
    };
  }

  /**
   * Whether the owner (an entitlement, or a code with a limit of its own) holds this device, and how many devices
   * it holds, as counted; read by `deviceCountsOf`. Exact under the owner's lock, which every change to its
   * devices takes.
   */
  deviceCountsStatement(table: DeviceTable, ownerId: string, fingerprintHash: string): Statement {
    return {
      sql:
        `SELECT (SELECT held FROM ${table.counts} WHERE ${table.owner} = ?) AS n, ` +
        `(SELECT COUNT(*) FROM ${table.name} WHERE ${table.owner} = ? AND fingerprint_hash = ?) AS mine`,
      parameters: [ownerId, ownerId, fingerprintHash],
    };
  }

  /** One device more in the owner's count, with `addDeviceStatement` (under the owner's lock). */
  countDeviceStatement(table: DeviceTable, ownerId: string): Statement {
    return this.countDevicesStatement(table, [{ ownerId, added: 1 }]);
  }

  /** `added` devices more in each owner's count, in one statement. */
  countDevicesStatement(table: DeviceTable, counts: { ownerId: string; added: number }[]): Statement {
    const more =
      this.dialect === "mysql"
        ? "ON DUPLICATE KEY UPDATE held = held + VALUES(held)"
        : `ON CONFLICT (${table.owner}) DO UPDATE SET held = held + excluded.held`;
    return {
      sql: `INSERT INTO ${table.counts} (${table.owner}, held) VALUES ${counts.map(() => "(?, ?)").join(", ")} ${more}`,
      parameters: counts.flatMap(({ ownerId, added }) => [ownerId, added]),
    };
  }

  /** The owners' device counts; `heldByOwnerOf` reads the result. */
  deviceCountStatement(table: DeviceTable, ownerIds: string[]): Statement {
    return {
      sql: `SELECT ${table.owner} AS owner_id, held FROM ${table.counts} WHERE ${table.owner} IN (${placeholders(ownerIds.length)})`,
      parameters: ownerIds,
    };
  }

  /** Each owner's count read; an owner with no row holds none. */
  heldByOwnerOf(result: unknown): Map<string, number> {
    const rows = result as { owner_id: string; held: number | string }[];
    return new Map(rows.map((row) => [row.owner_id, Number(row.held)]));
  }

  /** Which of these devices their owners hold; `deviceKeysOf(result, table.owner)` reads the result. */
  ownedDevicesStatement(table: DeviceTable, devices: OwnedDevices[]): Statement {
    const { sql, parameters } = ownedDevicesCondition(table.owner, devices);
    return { sql: `SELECT ${table.owner}, fingerprint_hash FROM ${table.name} WHERE ${sql}`, parameters };
  }

  deviceCountsOf(result: unknown): { count: number; present: boolean } {
    const [row] = result as { n: number | string; mine: number | string }[];
    return { count: Number(row?.n ?? 0), present: Number(row?.mine ?? 0) > 0 };
  }

  addDeviceStatement(table: DeviceTable, device: DeviceToAdd): Statement {
    return this.addDevicesStatement(table, [device]);
  }

  addDevicesStatement(table: DeviceTable, devices: DeviceToAdd[]): Statement {
    const withCode = table === ENTITLEMENT_DEVICES;
    const row = withCode ? "(?, ?, ?, ?, ?)" : "(?, ?, ?, ?)";
    return {
      sql: `INSERT INTO ${table.name} (${table.owner}, fingerprint_hash, fingerprint, created_at${withCode ? ", activation_code_id" : ""}) VALUES ${devices.map(() => row).join(", ")}`,
      parameters: devices.flatMap((device) => {
        const values = [device.ownerId, device.fingerprintHash, device.fingerprint, this.date(device.now)];
        return withCode ? [...values, device.activationCodeId] : values;
      }),
    };
  }

  /** Adds the device unless it is there already, in one statement. */
  addDeviceOnceStatement(table: DeviceTable, device: DeviceToAdd): Statement {
    return this.addDevicesOnceStatement(table, [device]);
  }

  /** Adds each device unless it is there already, in one statement (at most a few hundred devices). */
  addDevicesOnceStatement(table: DeviceTable, devices: DeviceToAdd[]): Statement {
    const unlessPresent =
      this.dataSource.options.type === "mysql"
        ? "ON DUPLICATE KEY UPDATE fingerprint_hash = fingerprint_hash"
        : "ON CONFLICT DO NOTHING";
    const rows = devices.map(() => "(?, ?, ?, ?)").join(", ");
    return {
      sql: `INSERT INTO ${table.name} (${table.owner}, fingerprint_hash, fingerprint, created_at) VALUES ${rows} ${unlessPresent}`,
      parameters: devices.flatMap((device) => [
        device.ownerId,
        device.fingerprintHash,
        device.fingerprint,
        this.date(device.now),
      ]),
    };
  }

  /** Frees a device's node-locked seat, if it holds one (under the entitlement's lock). */
  async removeDevice(manager: EntityManager, entitlementId: string, fingerprintHash: string): Promise<void> {
    const removed = await changedRows(
      manager,
      "DELETE FROM entitlement_devices WHERE entitlement_id = ? AND fingerprint_hash = ?",
      [entitlementId, fingerprintHash],
    );
    if (removed === 0) return;
    await manager.query("UPDATE entitlement_device_counts SET held = held - 1 WHERE entitlement_id = ?", [
      entitlementId,
    ]);
  }

  /** An activation with the code at `now`; `consented` when it accepted the terms. */
  recordCodeUseStatement(codeId: string, consented: boolean, now: Date): Statement {
    return this.recordCodeUsesStatement([{ codeId, consented, firstAt: now, uses: 1 }]);
  }

  /**
   * `uses` activations with each code, the first of them at `firstAt`; `consented` when any of them accepted the
   * terms. One statement for all the codes.
   */
  recordCodeUsesStatement(codeUses: CodeUses[]): Statement {
    if (codeUses.length === 1) return this.recordOneCodeUseStatement(codeUses[0]);
    const ids = codeUses.map((use) => use.codeId);
    const byCode = (values: (use: CodeUses) => unknown) => ({
      sql: `CASE id ${codeUses.map(() => "WHEN ? THEN ?").join(" ")} END`,
      parameters: codeUses.flatMap((use) => [use.codeId, values(use)]),
    });
    const uses = byCode((use) => use.uses);
    const firstAt = byCode((use) => this.date(use.firstAt));
    const consented = byCode((use) => this.bool(use.consented));
    return {
      sql:
        `UPDATE activation_codes SET activation_code_use_count = activation_code_use_count + ${uses.sql}, ` +
        `activation_time_stamp = COALESCE(activation_time_stamp, ${firstAt.sql}), ` +
        `user_consent = (user_consent OR ${consented.sql}) WHERE id IN (${placeholders(ids.length)})`,
      parameters: [...uses.parameters, ...firstAt.parameters, ...consented.parameters, ...ids],
    };
  }

  private recordOneCodeUseStatement(use: CodeUses): Statement {
    return {
      sql:
        "UPDATE activation_codes SET activation_code_use_count = activation_code_use_count + ?, " +
        "activation_time_stamp = COALESCE(activation_time_stamp, ?), user_consent = (user_consent OR ?) WHERE id = ?",
      parameters: [use.uses, this.date(use.firstAt), this.bool(use.consented), use.codeId],
    };
  }

  insertSessionStatement(row: LicenseSessionRow): Statement {
    return this.insertSessionsStatement([row]);
  }

  insertSessionsStatement(rows: LicenseSessionRow[]): Statement {
    return this.sessions.insertStatement(rows);
  }

  async findSession(manager: EntityManager, sessionId: string, lock = false): Promise<LicenseSessionRow | null> {
    const { sql, parameters } = this.sessionStatement(sessionId, lock);
    return this.sessionOf(await manager.query(sql, parameters));
  }

  sessionStatement(sessionId: string, lock: boolean): Statement {
    return this.sessions.selectStatement(`id = ?${lock ? this.forUpdate : ""}`, [sessionId]);
  }

  sessionOf(result: unknown): LicenseSessionRow | null {
    return this.sessions.hydrateAll(result)[0] ?? null;
  }

  /** Ends or releases a session (under its entitlement's lock), giving back the floating seat it holds. */
  async endSession(manager: EntityManager, session: LicenseSessionRow, state: number, now: Date): Promise<void> {
    await manager.query("UPDATE license_sessions SET state = ?, ended_at = ?, holds_floating_seat = ? WHERE id = ?", [
      state,
      this.date(now),
      this.bool(false),
      session.id,
    ]);
    if (session.holdsFloatingSeat) await this.floatingSeats.giveBack(manager, session.entitlementId);
  }

  /** The renewal's new lease, and its time as the session's last check-in (which only moves forward). */
  extendLeaseStatement(sessionId: string, lease: { leaseExpiresAt: Date; graceEndsAt: Date }, at: Date): Statement {
    return {
      sql: `UPDATE license_sessions SET lease_expires_at = ?, grace_ends_at = ?, last_check_in_at = ${this.greatest("last_check_in_at", "?")} WHERE id = ?`,
      parameters: [this.date(lease.leaseExpiresAt), this.date(lease.graceEndsAt), this.date(at), sessionId],
    };
  }

  /** The last check-in of each session, in one statement; a session's time only moves forward. */
  async recordCheckIns(checkIns: Map<string, Date>): Promise<void> {
    if (checkIns.size === 0) return;
    const cases = [...checkIns].map(() => "WHEN ? THEN ?").join(" ");
    const parameters: unknown[] = [];
    for (const [id, at] of checkIns) parameters.push(id, this.date(at));
    const ids = [...checkIns.keys()];
    const latest = `CASE id ${cases} END`;
    // Through SQLite's write queue: on its one shared connection it would otherwise join (and could be rolled
    // back with) another request's open transaction.
    await writeSerially(this.dataSource, () =>
      this.dataSource.query(
        `UPDATE license_sessions SET last_check_in_at = ${this.greatest("last_check_in_at", latest)} WHERE id IN (${ids.map(() => "?").join(", ")})`,
        [...parameters, ...ids],
      ),
    );
  }

  async listSessions(
    manager: EntityManager,
    query: { entitlementId: string; liveOnly: boolean; now: Date; offset: number; limit: number },
  ): Promise<{ rows: LicenseSessionRow[]; total: number }> {
    const where = query.liveOnly ? "entitlement_id = ? AND state = ? AND grace_ends_at > ?" : "entitlement_id = ?";
    const parameters = query.liveOnly
      ? [query.entitlementId, SESSION_STATE.live, this.date(query.now)]
      : [query.entitlementId];
    return this.sessions.page(manager, {
      where,
      parameters,
      order: "activated_at DESC, id",
      offset: query.offset,
      limit: query.limit,
    });
  }

  private greatest(column: string, value: string): string {
    return sqlGreatest(this.dialect, column, value);
  }

  private bool(value: boolean): unknown {
    return sqlBool(this.dialect, value);
  }
}

export interface DeviceTable {
  name: string;
  owner: string;
  /** The table counting each owner's devices. */
  counts: string;
}

export const ENTITLEMENT_DEVICES: DeviceTable = {
  name: "entitlement_devices",
  owner: "entitlement_id",
  counts: "entitlement_device_counts",
};
export const CODE_DEVICES: DeviceTable = {
  name: "activation_code_devices",
  owner: "activation_code_id",
  counts: "activation_code_device_counts",
};

export interface DeviceToAdd {
  ownerId: string;
  fingerprintHash: string;
  fingerprint: string;
  activationCodeId: string;
  now: Date;
}

/** Devices of one owner (an entitlement, or a code with a limit of its own) that a statement looks for. */
export interface OwnedDevices {
  ownerId: string;
  /** Fingerprint hashes. */
  hashes: string[];
}

/** A code's activations, as `recordCodeUsesStatement` counts them. */
export interface CodeUses {
  codeId: string;
  consented: boolean;
  firstAt: Date;
  uses: number;
}

/** The key of an owner's device in `deviceKeysOf`'s set. */
export function deviceKey(ownerId: string, fingerprintHash: string): string {
  return `${ownerId} ${fingerprintHash}`;
}

/** Rows of any of these owners' devices: one index range per owner. */
function ownedDevicesCondition(ownerColumn: string, devices: OwnedDevices[]): Statement {
  const ofOwner = ({ hashes }: OwnedDevices) =>
    `(${ownerColumn} = ? AND fingerprint_hash ${hashes.length === 1 ? "= ?" : `IN (${placeholders(hashes.length)})`})`;
  return {
    sql: devices.map(ofOwner).join(" OR "),
    parameters: devices.flatMap(({ ownerId, hashes }) => [ownerId, ...hashes]),
  };
}
