import type { DataSource, EntityManager } from "typeorm";
import {
  type Dialect,
  dialectOf,
  forUpdate,
  insertIgnore,
  inTransaction,
  readSerially,
  rowDate,
  sqlDate,
} from "../platform/database.js";

/** A credit balance's row: its current period and top-ups. */
export interface BalanceRow {
  assetId: string;
  entitlementId: string;
  periodStart: Date;
  lastDepositAt: Date | null;
  lastAutoBalanceAt: Date | null;
  nextAutoBalanceAt: Date | null;
}

/** The balance moved on to another period since the caller looked it up. */
export class BalancePeriodMoved extends Error {
  constructor(readonly periodStart: Date) {
    super("the credit balance moved to a new period");
  }
}

const COLUMNS = "asset_id, entitlement_id, period_start, last_deposit_at, last_auto_balance_at, next_auto_balance_at";

/** The `usage_balances` table. */
export class UsageBalanceStore {
  private readonly dialect: Dialect;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectOf(dataSource);
  }

  async find(manager: EntityManager, assetId: string, lock = false): Promise<BalanceRow | undefined> {
    const rows = (await manager.query(
      `SELECT ${COLUMNS} FROM usage_balances WHERE asset_id = ?${lock ? forUpdate(this.dialect) : ""}`,
      [assetId],
    )) as Record<string, unknown>[];
    return rows.map(balanceOf)[0];
  }

  /** The start of a credit balance's current period; a balance used for the first time starts one now. */
  async periodStartOrBegin(
    balance: { assetId: string; providerId: string; entitlementId: string },
    now: Date,
    nextAutoBalanceAt: Date | null,
  ): Promise<Date> {
    return inTransaction(this.dataSource, async (manager) => {
      const found = await this.find(manager, balance.assetId);
      if (found) return found.periodStart;
      await manager.query(
        `${insertIgnore(this.dialect)} INTO usage_balances (asset_id, provider_id, entitlement_id, period_start, next_auto_balance_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
        [
          balance.assetId,
          balance.providerId,
          balance.entitlementId,
          sqlDate(this.dialect, now),
          nextAutoBalanceAt ? sqlDate(this.dialect, nextAutoBalanceAt) : null,
          sqlDate(this.dialect, now),
        ],
      );
      return ((await this.find(manager, balance.assetId)) as BalanceRow).periodStart;
    });
  }

  /** The start of the balance's current period, read outside any transaction; undefined before its first use. */
  async currentPeriodStart(assetId: string): Promise<Date | undefined> {
    return readSerially(this.dataSource, async () => (await this.find(this.dataSource.manager, assetId))?.periodStart);
  }

  /** Fails with BalancePeriodMoved unless the balance is (still) in the period starting at `periodStart`. */
  async checkPeriod(manager: EntityManager, assetId: string, periodStart: Date): Promise<void> {
    const current = (await this.find(manager, assetId))?.periodStart;
    if (current && current.getTime() !== periodStart.getTime()) throw new BalancePeriodMoved(current);
  }

  /** Balances whose automatic top-up is due, earliest first. */
  async due(now: Date, limit: number): Promise<BalanceRow[]> {
    return readSerially(this.dataSource, async () => {
      const rows = (await this.dataSource.query(
        `SELECT ${COLUMNS} FROM usage_balances WHERE next_auto_balance_at <= ? ORDER BY next_auto_balance_at LIMIT ?`,
        [sqlDate(this.dialect, now), limit],
      )) as Record<string, unknown>[];
      return rows.map(balanceOf);
    });
  }

  async deposited(manager: EntityManager, assetId: string, at: Date): Promise<void> {
    await manager.query("UPDATE usage_balances SET last_deposit_at = ? WHERE asset_id = ?", [
      sqlDate(this.dialect, at),
      assetId,
    ]);
  }

  /** Starts a new balance period (an automatic top-up) and sets when the next one is due. */
  async startPeriod(
    manager: EntityManager,
    assetId: string,
    periodStart: Date,
    now: Date,
    nextAutoBalanceAt: Date | null,
  ): Promise<void> {
    await manager.query(
      "UPDATE usage_balances SET period_start = ?, last_deposit_at = ?, last_auto_balance_at = ?, next_auto_balance_at = ? WHERE asset_id = ?",
      [
        sqlDate(this.dialect, periodStart),
        sqlDate(this.dialect, now),
        sqlDate(this.dialect, now),
        nextAutoBalanceAt ? sqlDate(this.dialect, nextAutoBalanceAt) : null,
        assetId,
      ],
    );
  }

  async setNextAutoBalance(manager: EntityManager, assetId: string, next: Date | null): Promise<void> {
    await manager.query("UPDATE usage_balances SET next_auto_balance_at = ? WHERE asset_id = ?", [
      next ? sqlDate(this.dialect, next) : null,
      assetId,
    ]);
  }
}

function balanceOf(row: Record<string, unknown>): BalanceRow {
  return {
    assetId: String(row.asset_id),
    entitlementId: String(row.entitlement_id),
    periodStart: rowDate(row.period_start) as Date,
    lastDepositAt: rowDate(row.last_deposit_at),
    lastAutoBalanceAt: rowDate(row.last_auto_balance_at),
    nextAutoBalanceAt: rowDate(row.next_auto_balance_at),
  };
}
