import type { DataSource, EntityManager } from "typeorm";
import { MonitoredAssetEntity, type MonitoredAssetRow } from "../catalog/entities.js";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import {
  changedRows,
  type Dialect,
  dialectOf,
  forShare,
  forShareSkipLocked,
  forUpdate,
  insertIgnore,
  inTransaction,
  readSerially,
  rowDate,
  sqlDate,
  writeSerially,
} from "../platform/database.js";
import type { Statement } from "../platform/statement-batch.js";
import { UsageBalanceStore } from "./usage-balance-store.js";

export const RECORD_KIND = { transaction: 1, preallocation: 2 } as const;

/** One amount of usage, as stored. */
export interface UsageRecordRow {
  providerId: string;
  entitlementId: string;
  assetId: string;
  sessionId: string;
  /** Null for a pre-allocation. */
  transactionId: bigint | null;
  kind: number;
  amountMicro: number;
  periodStart: Date;
  occurredAt: Date;
  recordedAt: Date;
}

/** A counter's period row: which asset and period, and what a new row holds. */
export interface PeriodRef {
  assetId: string;
  providerId: string;
  entitlementId: string;
  periodStart: Date;
  periodEnd: Date | null;
  /** A credit balance's credits for a new period row (micro-units); null for metered usage or unlimited credits. */
  initialCreditsMicro: number | null;
  /** Peak counters rebuild from the highest record, others from the sum. */
  peak: boolean;
  /** Credit balances: the balance must still be in this period (auto-balance moves it on). */
  balance: boolean;
}

/** A counter rebuilt from the records: its new generation, value and limit. */
export interface RebuiltCounter {
  generation: number;
  valueMicro: number;
  limitMicro: number | null;
}

export interface StoredStatus {
  periodStart: Date;
  /** Null for a credit balance (its period ends only with a top-up). */
  periodEnd: Date | null;
  status: number;
}

const RECORD_COLUMNS =
  "provider_id, entitlement_id, asset_id, session_id, transaction_id, kind, amount, period_start, occurred_at, recorded_at";
const RECORD_TUPLE = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/** The usage tables' SQL: records, period rows (the generation fence), statuses and balances. */
export class UsageStore {
  readonly dialect: Dialect;
  private readonly assets: SqlTable<MonitoredAssetRow>;
  private readonly insertSql = new Map<string, string>();

  /** Credit balances' rows (a rebuild checks that its balance is still in the period it counts). */
  readonly balances: UsageBalanceStore;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectOf(dataSource);
    this.balances = new UsageBalanceStore(dataSource);
    this.assets = new SqlTable(dataSource, MonitoredAssetEntity);
  }

  /** The entitlement's provider and customer and its own monitored assets; null when there is no such entitlement. */
  async entitlementAssets(
    entitlementId: string,
  ): Promise<{ providerId: string; customerId: string; assets: MonitoredAssetRow[] } | null> {
    return readSerially(this.dataSource, async () => {
      const manager = this.dataSource.manager;
      const [owner] = (await manager.query("SELECT provider_id, customer_id FROM entitlements WHERE id = ?", [
        entitlementId,
      ])) as { provider_id: string; customer_id: string | null }[];
      if (!owner) return null;
      const assets = await this.assets.select(manager, "entitlement_id = ? ORDER BY product_id, metric_name", [
        entitlementId,
      ]);
      return { providerId: owner.provider_id, customerId: owner.customer_id ?? "", assets };
    });
  }

  /** Inserts the records in one statement; with `ignoreDuplicates` an already recorded transaction is skipped. Answers the rows stored. */
  async insertRecords(manager: EntityManager, rows: UsageRecordRow[], ignoreDuplicates: boolean): Promise<number> {
    if (rows.length === 0) return 0;
    const { sql, parameters } = this.insertRecordsStatement(rows, ignoreDuplicates);
    return changedRows(manager, sql, parameters);
  }

  /** The INSERT of `rows` (at least one), to run in a batch. */
  insertRecordsStatement(rows: UsageRecordRow[], ignoreDuplicates: boolean): Statement {
    const parameters: unknown[] = [];
    const date = datesOf(this.dialect);
    for (const row of rows) {
      parameters.push(
        row.providerId,
        row.entitlementId,
        row.assetId,
        row.sessionId,
        row.transactionId,
        row.kind,
        row.amountMicro,
        date(row.periodStart),
        date(row.occurredAt),
        date(row.recordedAt),
      );
    }
    return { sql: this.insertSqlFor(rows.length, ignoreDuplicates), parameters };
  }

  /** A BIGINT column read as exact text: SQLite's driver reads integers past 2^53 as doubles. */
  asText(column: string): string {
    return this.dialect === "mysql" ? column : `CAST(${column} AS TEXT)`;
  }

  /** Which of these transaction ids the session has recorded, locking them (a concurrent replay waits). */
  async recordedTransactionIds(manager: EntityManager, sessionId: string, ids: bigint[]): Promise<Set<bigint>> {
    const rows = (await manager.query(
      `SELECT ${this.asText("transaction_id")} AS transaction_id FROM usage_records WHERE session_id = ? AND transaction_id IN (${placeholders(ids.length)})${forUpdate(this.dialect)}`,
      [sessionId, ...ids],
    )) as { transaction_id: string }[];
    return new Set(rows.map((row) => BigInt(row.transaction_id)));
  }

  /**
   * The generations of these periods' counters, share-locked until the transaction ends: a rebuild (which takes
   * a new generation) waits for every write holding them. A period without a row is absent from the answer.
   */
  async lockGenerations(
    manager: EntityManager,
    keys: { assetId: string; periodStart: Date }[],
    skipLocked = false,
  ): Promise<Map<string, number>> {
    const { sql, parameters } = this.lockGenerationsStatement(keys, skipLocked);
    return generationsOf(await manager.query(sql, parameters));
  }

  /**
   * lockGenerations as a statement, to run in a batch; `generationsOf` reads its rows. With `skipLocked`, a period
   * whose row another transaction holds exclusively (a rebuild, a top-up) is absent too.
   */
  lockGenerationsStatement(keys: { assetId: string; periodStart: Date }[], skipLocked = false): Statement {
    return this.generationsStatement(keys, skipLocked ? forShareSkipLocked(this.dataSource) : forShare(this.dialect));
  }

  /** The names of these periods that have a row, read without locking them. */
  async periodsWithRows(manager: EntityManager, keys: { assetId: string; periodStart: Date }[]): Promise<Set<string>> {
    const { sql, parameters } = this.generationsStatement(keys, "");
    return new Set(generationsOf(await manager.query(sql, parameters)).keys());
  }

  private generationsStatement(keys: { assetId: string; periodStart: Date }[], lock: string): Statement {
    const tuples = keys.map(() => "(?, ?)").join(", ");
    return {
      sql: `SELECT asset_id, period_start, generation FROM usage_periods WHERE (asset_id, period_start) IN (${tuples}) ORDER BY asset_id, period_start${lock}`,
      parameters: keys.flatMap((key) => [key.assetId, sqlDate(this.dialect, key.periodStart)]),
    };
  }

  /**
   * Rebuilds a counter from the records under a new generation: the period row is locked, so every write of an
   * older generation has committed (and is counted) or will find its generation gone (and is not written).
   */
  async rebuild(ref: PeriodRef, now: Date): Promise<RebuiltCounter> {
    return inTransaction(this.dataSource, async (manager) => {
      const period = await this.lockPeriod(manager, ref, now);
      if (ref.balance) await this.balances.checkPeriod(manager, ref.assetId, ref.periodStart);
      const generation = period.generation + 1;
      await manager.query("UPDATE usage_periods SET generation = ? WHERE asset_id = ? AND period_start = ?", [
        generation,
        ref.assetId,
        sqlDate(this.dialect, ref.periodStart),
      ]);
      const valueMicro = await this.recordedTotal(manager, ref.assetId, ref.periodStart, ref.peak);
      return { generation, valueMicro, limitMicro: period.creditTotal };
    });
  }

  /** The period's row, created when missing, locked for update. */
  async lockPeriod(
    manager: EntityManager,
    ref: PeriodRef,
    now: Date,
  ): Promise<{ generation: number; creditTotal: number | null }> {
    const start = sqlDate(this.dialect, ref.periodStart);
    await manager.query(
      `${insertIgnore(this.dialect)} INTO usage_periods (asset_id, period_start, provider_id, entitlement_id, period_end, generation, credit_total, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)`,
      [
        ref.assetId,
        start,
        ref.providerId,
        ref.entitlementId,
        ref.periodEnd ? sqlDate(this.dialect, ref.periodEnd) : null,
        ref.initialCreditsMicro,
        sqlDate(this.dialect, now),
      ],
    );
    const [row] = (await manager.query(
      `SELECT generation, credit_total FROM usage_periods WHERE asset_id = ? AND period_start = ?${forUpdate(this.dialect)}`,
      [ref.assetId, start],
    )) as { generation: unknown; credit_total: unknown }[];
    return {
      generation: Number(row.generation),
      creditTotal: row.credit_total === null ? null : Number(row.credit_total),
    };
  }

  /** Sets a period's generation and credits (a top-up); the row must be locked by the caller. */
  async setPeriodCredits(
    manager: EntityManager,
    ref: { assetId: string; periodStart: Date },
    generation: number,
    creditTotal: number | null,
  ): Promise<void> {
    await manager.query(
      "UPDATE usage_periods SET generation = ?, credit_total = ? WHERE asset_id = ? AND period_start = ?",
      [generation, creditTotal, ref.assetId, sqlDate(this.dialect, ref.periodStart)],
    );
  }

  /** The sum (or, for peak counters, the highest) of the amounts recorded for an asset in a period (null: all). */
  async recordedTotal(
    manager: EntityManager,
    assetId: string,
    periodStart: Date | null,
    peak: boolean,
  ): Promise<number> {
    const inPeriod = periodStart ? " AND period_start = ?" : "";
    const [row] = (await manager.query(
      `SELECT COALESCE(${peak ? "MAX" : "SUM"}(amount), 0) AS total FROM usage_records WHERE asset_id = ?${inPeriod}`,
      periodStart ? [assetId, sqlDate(this.dialect, periodStart)] : [assetId],
    )) as { total: unknown }[];
    return Number(row.total);
  }

  /** The status last reported for an asset (its events' latest `status`); null when none was ever stored. */
  async reportedStatus(manager: EntityManager, assetId: string): Promise<number | null> {
    const [row] = (await manager.query("SELECT status FROM usage_statuses WHERE asset_id = ?", [assetId])) as {
      status: unknown;
    }[];
    return row ? Number(row.status) : null;
  }

  /** A balance period's credits (micro-units); null when the period has no row yet or its credits are unlimited. */
  async periodCredits(manager: EntityManager, assetId: string, periodStart: Date): Promise<number | null> {
    const [row] = (await manager.query(
      "SELECT credit_total FROM usage_periods WHERE asset_id = ? AND period_start = ?",
      [assetId, sqlDate(this.dialect, periodStart)],
    )) as { credit_total: unknown }[];
    return row && row.credit_total !== null ? Number(row.credit_total) : null;
  }

  /** The status last reported for an asset, its row locked (created at Normal for this period when missing). */
  async lockStatus(
    manager: EntityManager,
    status: { assetId: string; providerId: string; periodStart: Date; periodEnd: Date | null; normal: number },
    now: Date,
  ): Promise<StoredStatus> {
    const select = `SELECT period_start, period_end, status FROM usage_statuses WHERE asset_id = ?${forUpdate(this.dialect)}`;
    type Row = { period_start: unknown; period_end: unknown; status: unknown };
    let [row] = (await manager.query(select, [status.assetId])) as Row[];
    if (!row) {
      await manager.query(
        `${insertIgnore(this.dialect)} INTO usage_statuses (asset_id, provider_id, period_start, period_end, status, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
        [
          status.assetId,
          status.providerId,
          sqlDate(this.dialect, status.periodStart),
          status.periodEnd ? sqlDate(this.dialect, status.periodEnd) : null,
          status.normal,
          sqlDate(this.dialect, now),
        ],
      );
      [row] = (await manager.query(select, [status.assetId])) as Row[];
    }
    return {
      periodStart: rowDate(row.period_start) as Date,
      periodEnd: rowDate(row.period_end),
      status: Number(row.status),
    };
  }

  /** Assets whose last reported status is above Normal in a period that has ended, the longest ended first. */
  async raisedEndedStatuses(now: Date, limit: number): Promise<{ assetId: string; periodStart: Date }[]> {
    return readSerially(this.dataSource, async () => {
      const rows = (await this.dataSource.query(
        "SELECT asset_id, period_start FROM usage_statuses WHERE status > 1 AND period_end <= ? ORDER BY period_end LIMIT ?",
        [sqlDate(this.dialect, now), limit],
      )) as { asset_id: string; period_start: unknown }[];
      return rows.map((row) => ({ assetId: row.asset_id, periodStart: rowDate(row.period_start) as Date }));
    });
  }

  /**
   * Counters' periods still current (metered periods not ended, each credit balance's current period), of assets
   * after `afterAssetId` in id order.
   */
  async currentPeriods(
    now: Date,
    afterAssetId: string,
    limit: number,
  ): Promise<{ assetId: string; entitlementId: string; periodStart: Date }[]> {
    return readSerially(this.dataSource, async () => {
      const rows = (await this.dataSource.query(
        `SELECT p.asset_id, p.entitlement_id, p.period_start FROM usage_periods p
          LEFT JOIN usage_balances b ON b.asset_id = p.asset_id
          WHERE p.asset_id > ? AND (p.period_end > ? OR b.period_start = p.period_start)
          ORDER BY p.asset_id LIMIT ?`,
        [afterAssetId, sqlDate(this.dialect, now), limit],
      )) as { asset_id: string; entitlement_id: string; period_start: unknown }[];
      return rows.map((row) => ({
        assetId: row.asset_id,
        entitlementId: row.entitlement_id,
        periodStart: rowDate(row.period_start) as Date,
      }));
    });
  }

  /** The entitlement an asset belongs to; null when the asset is gone. */
  async entitlementOfAsset(assetId: string): Promise<string | null> {
    const [row] = (await readSerially(this.dataSource, () =>
      this.dataSource.query("SELECT entitlement_id FROM monitored_assets WHERE id = ?", [assetId]),
    )) as { entitlement_id: string | null }[];
    return row?.entitlement_id ?? null;
  }

  /** Sets an asset's reported status back to Normal without an event (its asset no longer meters anything). */
  async clearStatus(assetId: string, now: Date): Promise<void> {
    await writeSerially(this.dataSource, () =>
      this.dataSource.query(
        "UPDATE usage_statuses SET status = 1, period_end = NULL, updated_at = ? WHERE asset_id = ?",
        [sqlDate(this.dialect, now), assetId],
      ),
    );
  }

  /** Has the asset's status looked at again from `at` on, whichever instance is then running the scheduler. */
  async markRecheck(manager: EntityManager, assetId: string, at: Date, periodStart: Date): Promise<void> {
    await manager.query("UPDATE usage_statuses SET recheck_at = ?, recheck_period_start = ? WHERE asset_id = ?", [
      sqlDate(this.dialect, at),
      sqlDate(this.dialect, periodStart),
      assetId,
    ]);
  }

  /** Clears a look-again that was due by `now` (one asked for since stays). */
  async clearRecheck(manager: EntityManager, assetId: string, now: Date): Promise<void> {
    await manager.query(
      "UPDATE usage_statuses SET recheck_at = NULL, recheck_period_start = NULL WHERE asset_id = ? AND recheck_at <= ?",
      [assetId, sqlDate(this.dialect, now)],
    );
  }

  /**
   * Assets whose status was to be looked at again by `before`, the longest waiting first, each with the period
   * the look is for (null: asked for before the period was stored with it).
   */
  async dueRechecks(before: Date, limit: number): Promise<{ assetId: string; periodStart: Date | null }[]> {
    return readSerially(this.dataSource, async () => {
      const rows = (await this.dataSource.query(
        "SELECT asset_id, recheck_period_start FROM usage_statuses WHERE recheck_at <= ? ORDER BY recheck_at LIMIT ?",
        [sqlDate(this.dialect, before), limit],
      )) as { asset_id: string; recheck_period_start: unknown }[];
      return rows.map((row) => ({ assetId: row.asset_id, periodStart: rowDate(row.recheck_period_start) }));
    });
  }

  async saveStatus(manager: EntityManager, assetId: string, stored: StoredStatus, now: Date): Promise<void> {
    const sql =
      "UPDATE usage_statuses SET period_start = ?, period_end = ?, status = ?, updated_at = ? WHERE asset_id = ?";
    await manager.query(sql, [
      sqlDate(this.dialect, stored.periodStart),
      stored.periodEnd ? sqlDate(this.dialect, stored.periodEnd) : null,
      stored.status,
      sqlDate(this.dialect, now),
      assetId,
    ]);
  }

  private insertSqlFor(count: number, ignoreDuplicates: boolean): string {
    const name = `${count}:${ignoreDuplicates}`;
    let sql = this.insertSql.get(name);
    if (!sql) {
      const verb = ignoreDuplicates ? insertIgnore(this.dialect) : "INSERT";
      sql = `${verb} INTO usage_records (${RECORD_COLUMNS}) VALUES ${Array(count).fill(RECORD_TUPLE).join(", ")}`;
      this.insertSql.set(name, sql);
    }
    return sql;
  }
}

/** sqlDate, converting each instant once per batch (a batch's rows share most of their dates). */
function datesOf(dialect: Dialect): (value: Date) => Date | string {
  const converted = new Map<number, Date | string>();
  return (value) => {
    let text = converted.get(value.getTime());
    if (text === undefined) {
      text = sqlDate(dialect, value);
      converted.set(value.getTime(), text);
    }
    return text;
  };
}

/** The name of an asset's period, as maps of counters key it. */
export function periodName(assetId: string, periodStart: Date): string {
  return `${assetId}:${periodStart.getTime()}`;
}

/** The generations lockGenerationsStatement's rows hold, by period name. */
export function generationsOf(rows: unknown): Map<string, number> {
  return new Map(
    (rows as { asset_id: string; period_start: unknown; generation: unknown }[]).map((row) => [
      periodName(row.asset_id, rowDate(row.period_start) as Date),
      Number(row.generation),
    ]),
  );
}
