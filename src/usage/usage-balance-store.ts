import type { DataSource, EntityManager } from "typeorm";
import { type Dialect, dialectOf, forUpdate, readSerially, rowDate, sqlDate } from "../platform/database.js";

/** A credit balance's row: its current period and top-ups. */
export interface BalanceRow {
  assetId: string;
  entitlementId: string;
  periodStart: Date;
  lastDepositAt: Date | null;
  lastAutoBalanceAt: Date | null;
  nextAutoBalanceAt: Date | null;
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
