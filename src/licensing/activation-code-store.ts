import type { DataSource, EntityManager } from "typeorm";
import { RequiredAuthenticationLevel } from "../../gen/provision/v1/entitlement_pb.js";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import { dialectOf, forUpdate } from "../platform/database.js";
import type { Statement } from "../platform/statement-batch.js";
import { ActivationCodeEntity, type ActivationCodeRow } from "./entities.js";
import { policyOf } from "./entitlement-mapper.js";

/** What an invitation shows of a device activated with its code. */
export type ActivatedDevice = { fingerprint: string };

/** Devices activated with one code that a listing names (in registeredFingerprints), the first ones. */
export const MAX_LISTED_DEVICES = 1000;

const tables = new WeakMap<DataSource, SqlTable<ActivationCodeRow>>();

function codesTable(manager: EntityManager): SqlTable<ActivationCodeRow> {
  let table = tables.get(manager.connection);
  if (!table) {
    table = new SqlTable(manager.connection, ActivationCodeEntity);
    tables.set(manager.connection, table);
  }
  return table;
}

/** Whether the provider owns the entitlement, and whether it is a template; null when not found. */
export async function findEntitlementKind(
  manager: EntityManager,
  providerId: string,
  entitlementId: string,
): Promise<{ isTemplate: boolean; policyLevel: RequiredAuthenticationLevel } | null> {
  const [row] = (await manager.query(
    "SELECT is_template, activation_policy FROM entitlements WHERE id = ? AND provider_id = ?",
    [entitlementId, providerId],
  )) as { is_template: unknown; activation_policy: string | null }[];
  if (!row) return null;
  const policy = policyOf({ activationPolicy: row.activation_policy });
  return {
    isTemplate: Number(row.is_template) === 1,
    policyLevel: policy?.requiredAuthenticationLevel ?? RequiredAuthenticationLevel.UNSPECIFIED,
  };
}

/** Inserts a code; a taken `codeKey` fails with the driver's unique violation. */
export async function insertActivationCode(manager: EntityManager, row: ActivationCodeRow): Promise<void> {
  await codesTable(manager).insert(manager, [row]);
}

/**
 * The code with this key, of any provider; `lock` takes its row (SELECT ... FOR UPDATE on MySQL; SQLite's write
 * transactions run one at a time).
 */
export async function findActivationCodeByKey(
  manager: EntityManager,
  key: string,
  lock: boolean,
): Promise<ActivationCodeRow | null> {
  const { sql, parameters } = activationCodeByKeyStatement(manager, key, lock);
  return activationCodeOf(manager, await manager.query(sql, parameters));
}

/** findActivationCodeByKey's statement, for a batch; `activationCodeOf` reads its result. */
export function activationCodeByKeyStatement(manager: EntityManager, key: string, lock: boolean): Statement {
  const clause = lock ? forUpdate(dialectOf(manager.connection)) : "";
  return codesTable(manager).selectStatement(`code_key = ?${clause}`, [key]);
}

/** The codes with these keys, of any provider, locked when `lock`; `activationCodesOf` reads the result. */
export function activationCodesByKeysStatement(manager: EntityManager, keys: string[], lock: boolean): Statement {
  const clause = lock ? forUpdate(dialectOf(manager.connection)) : "";
  return codesTable(manager).selectStatement(`code_key IN (${placeholders(keys.length)})${clause}`, keys);
}

export function activationCodesOf(manager: EntityManager, result: unknown): ActivationCodeRow[] {
  return codesTable(manager).hydrateAll(result);
}

export function activationCodeOf(manager: EntityManager, result: unknown): ActivationCodeRow | null {
  return codesTable(manager).hydrateAll(result)[0] ?? null;
}

/** One code of the provider's entitlement, deleted or not. */
export async function findActivationCode(
  manager: EntityManager,
  scope: { providerId: string; entitlementId: string },
  codeId: string,
): Promise<ActivationCodeRow | null> {
  const [row] = await codesTable(manager).select(manager, "id = ? AND provider_id = ? AND entitlement_id = ?", [
    codeId,
    scope.providerId,
    scope.entitlementId,
  ]);
  return row ?? null;
}

/** A page of an entitlement's codes, newest first, with the total count. */
export async function listActivationCodeRows(
  manager: EntityManager,
  scope: { providerId: string; entitlementId: string },
  page: { offset: number; limit: number },
): Promise<{ rows: ActivationCodeRow[]; total: number }> {
  const table = codesTable(manager);
  const where = "provider_id = ? AND entitlement_id = ?";
  const parameters = [scope.providerId, scope.entitlementId];
  const raw = (await manager.query(
    `SELECT ${table.columnList}, COUNT(*) OVER () AS total_count FROM ${table.name} WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    [...parameters, page.limit, page.offset],
  )) as Record<string, unknown>[];
  if (raw.length > 0) return { rows: raw.map((row) => table.hydrate(row)), total: Number(raw[0].total_count) };
  if (page.offset === 0) return { rows: [], total: 0 };
  const [count] = (await manager.query(
    `SELECT COUNT(*) AS total_count FROM ${table.name} WHERE ${where}`,
    parameters,
  )) as {
    total_count: unknown;
  }[];
  return { rows: [], total: Number(count.total_count) };
}

export async function markActivationCodeDeleted(manager: EntityManager, codeId: string): Promise<void> {
  await manager.query(`UPDATE ${codesTable(manager).name} SET is_deleted = 1 WHERE id = ?`, [codeId]);
}

/** The devices activated with each code, oldest first, at most MAX_LISTED_DEVICES per code, in one query. */
export async function loadCodeDevices(
  manager: EntityManager,
  codeIds: string[],
): Promise<Map<string, ActivatedDevice[]>> {
  const byCode = new Map<string, ActivatedDevice[]>(codeIds.map((id) => [id, []]));
  if (codeIds.length === 0) return byCode;
  const raw = (await manager.query(
    `SELECT activation_code_id, fingerprint FROM (
       SELECT activation_code_id, fingerprint, created_at,
              ROW_NUMBER() OVER (PARTITION BY activation_code_id ORDER BY created_at, fingerprint_hash) AS position
       FROM activation_code_devices WHERE activation_code_id IN (${placeholders(codeIds.length)})
     ) numbered WHERE position <= ? ORDER BY activation_code_id, position`,
    [...codeIds, MAX_LISTED_DEVICES],
  )) as { activation_code_id: string; fingerprint: string }[];
  for (const row of raw) byCode.get(row.activation_code_id)?.push({ fingerprint: row.fingerprint });
  return byCode;
}

/** The code a session was activated with (of any provider, deleted or not), for a batch; read by `activationCodeOf`. */
export function activationCodeOfSessionStatement(manager: EntityManager, sessionId: string): Statement {
  return codesTable(manager).selectStatement("id = (SELECT activation_code_id FROM license_sessions WHERE id = ?)", [
    sessionId,
  ]);
}

/** What a user's invitations resolve to: their distinct entitlements (at most 2 listed) and the newest code key. */
export interface UserInvitations {
  /** Two entries when there are two or more. */
  entitlementIds: string[];
  /** The newest live code inviting the user, when exactly one entitlement is invited. */
  codeKey: string | null;
}

/**
 * The live codes (not deleted, not expired at `now`) inviting a user by id or by one of their groups, of any
 * provider, on entitlements that are neither templates nor revoked. Ids and groups are compared lower case,
 * as codes store them; each branch reads its own index (0005-user-codes).
 */
export async function findUserInvitations(
  manager: EntityManager,
  user: { id: string; groups: string[] },
  now: Date,
): Promise<UserInvitations> {
  const table = codesTable(manager);
  const expiry = table.columns.find((column) => column.propertyName === "expirationTimeStamp");
  const at = expiry ? manager.connection.driver.preparePersistentValue(now, expiry) : now;
  const groups = [...new Set(user.groups.map((group) => group.toLowerCase()))].filter((group) => group.length <= 36);
  const live = `c.is_deleted = 0 AND (c.expiration_time_stamp IS NULL OR c.expiration_time_stamp > ?)
    AND e.is_template = 0 AND e.is_revoked = 0`;
  const branch = (match: string) =>
    `SELECT c.entitlement_id, c.code_key, c.created_at, c.id FROM ${table.name} c
     JOIN entitlements e ON e.id = c.entitlement_id WHERE ${match} AND ${live}`;
  const branches = [branch("c.user_id = ?")];
  const parameters: unknown[] = [user.id.toLowerCase(), at];
  if (groups.length > 0) {
    branches.push(branch(`c.organization_group_id IN (${placeholders(groups.length)})`));
    parameters.push(...groups, at);
  }
  const invited = `(${branches.join(" UNION ALL ")}) invited`;
  const entitlements = (await manager.query(`SELECT DISTINCT entitlement_id FROM ${invited} LIMIT 2`, parameters)) as {
    entitlement_id: string;
  }[];
  const entitlementIds = entitlements.map((row) => row.entitlement_id);
  if (entitlementIds.length !== 1) return { entitlementIds, codeKey: null };
  const [newest] = (await manager.query(
    `SELECT code_key FROM ${invited} WHERE entitlement_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`,
    [...parameters, entitlementIds[0]],
  )) as { code_key: string }[];
  return { entitlementIds, codeKey: newest?.code_key ?? null };
}
