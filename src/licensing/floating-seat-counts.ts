import type { DataSource, EntityManager } from "typeorm";
import { placeholders } from "../catalog/sql-table.js";
import { type Dialect, dialectOf, forUpdate, rowDate, sqlBool, sqlLeast } from "../platform/database.js";
import type { Statement } from "../platform/statement-batch.js";
import type { SessionStore } from "./session-store.js";

/** An entitlement's floating seats as counted: sessions holding one, and a time none of their graces ends before. */
export interface FloatingSeatCount {
  held: number;
  /** Null when no seat is held. */
  earliestEnd: Date | null;
}

/** Whether a held seat's grace may be over at `now`: none is before the count's earliest end. */
export function mayHaveLapsed(count: FloatingSeatCount, now: Date): boolean {
  return count.earliestEnd !== null && count.earliestEnd <= now;
}

/**
 * The SQL of `floating_seat_counts` (see migration 0013). Every write to a count, or to which sessions hold a
 * seat, is made under the entitlement's row lock (activation, release, EndSession); renew, which takes only the
 * session's lock, may lower `earliest_end` and nothing else.
 */
export class FloatingSeatCounts {
  private readonly dialect: Dialect;
  private readonly forUpdate: string;

  constructor(
    dataSource: DataSource,
    private readonly store: SessionStore,
  ) {
    this.dialect = dialectOf(dataSource);
    this.forUpdate = forUpdate(this.dialect);
  }

  /** The count, locked; read by `countOf`. */
  countStatement(entitlementId: string): Statement {
    return {
      sql: `SELECT held, earliest_end FROM floating_seat_counts WHERE entitlement_id = ?${this.forUpdate}`,
      parameters: [entitlementId],
    };
  }

  /** The counts of several entitlements, locked; read by `countsOf`. */
  countsStatement(entitlementIds: string[]): Statement {
    return {
      sql: `SELECT entitlement_id, held, earliest_end FROM floating_seat_counts WHERE entitlement_id IN (${placeholders(entitlementIds.length)})${this.forUpdate}`,
      parameters: entitlementIds,
    };
  }

  /** Each entitlement's count read by `countsStatement`, by entitlement id. */
  countsOf(result: unknown, entitlementIds: string[]): Map<string, FloatingSeatCount> {
    const rows = result as { entitlement_id: string }[];
    const counts = new Map(entitlementIds.map((id) => [id, this.countOf([])]));
    for (const row of rows) counts.set(row.entitlement_id, this.countOf([row]));
    return counts;
  }

  countOf(result: unknown): FloatingSeatCount {
    const [row] = result as { held: number | string; earliest_end: unknown }[];
    if (!row) return { held: 0, earliestEnd: null };
    return { held: Number(row.held), earliestEnd: rowDate(row.earliest_end) };
  }

  /** The sessions still holding a seat whose grace is over at `now`, locked; read by `idsOf`. */
  lapsedStatement(entitlementId: string, now: Date): Statement {
    return {
      sql: `SELECT id FROM license_sessions WHERE entitlement_id = ? AND holds_floating_seat = ? AND grace_ends_at <= ?${this.forUpdate}`,
      parameters: [entitlementId, this.bool(true), this.store.date(now)],
    };
  }

  /** Gives back the seats of these (locked) lapsed sessions. */
  releaseStatement(sessionIds: string[]): Statement {
    return {
      sql: `UPDATE license_sessions SET holds_floating_seat = ? WHERE id IN (${sessionIds.map(() => "?").join(", ")})`,
      parameters: [this.bool(false), ...sessionIds],
    };
  }

  /**
   * Writes the counts activations decided (under the entitlements' locks), in one statement, whether or not an
   * entitlement has its row yet. `VALUES(col)` is MariaDB's spelling of the row being inserted (MySQL 8 deprecates
   * it for an alias, which MariaDB lacks).
   */
  storeStatement(counts: Map<string, FloatingSeatCount>): Statement {
    const stored =
      this.dialect === "mysql"
        ? "ON DUPLICATE KEY UPDATE held = VALUES(held), earliest_end = VALUES(earliest_end)"
        : "ON CONFLICT (entitlement_id) DO UPDATE SET held = excluded.held, earliest_end = excluded.earliest_end";
    return {
      sql: `INSERT INTO floating_seat_counts (entitlement_id, held, earliest_end) VALUES ${[...counts].map(() => "(?, ?, ?)").join(", ")} ${stored}`,
      parameters: [...counts].flatMap(([id, count]) => [
        id,
        count.held,
        count.earliestEnd && this.store.date(count.earliestEnd),
      ]),
    };
  }

  /**
   * Writes the count of an activation that looked for lapsed seats, after the seats given back: the earliest end
   * is found again among the sessions still holding one (an index's first entry), or is the new session's.
   */
  recountStatement(entitlementId: string, held: number, graceEndsAt: Date): Statement {
    const end = this.store.date(graceEndsAt);
    const earliest =
      "SELECT MIN(grace_ends_at) FROM license_sessions WHERE entitlement_id = ? AND holds_floating_seat = ?";
    return {
      sql: `UPDATE floating_seat_counts SET held = ?, earliest_end = ${sqlLeast(this.dialect, "?", `COALESCE((${earliest}), ?)`)} WHERE entitlement_id = ?`,
      parameters: [held, end, entitlementId, this.bool(true), end, entitlementId],
    };
  }

  /** A session holding a seat ended or was released (under the entitlement's lock): one seat fewer. */
  async giveBack(manager: EntityManager, entitlementId: string): Promise<void> {
    await manager.query("UPDATE floating_seat_counts SET held = held - 1 WHERE entitlement_id = ?", [entitlementId]);
  }

  /** A renewal ended a held seat's grace sooner than before: the earliest end is no later than the new one. */
  earlierEndStatement(entitlementId: string, graceEndsAt: Date): Statement {
    const end = this.store.date(graceEndsAt);
    return {
      sql: `UPDATE floating_seat_counts SET earliest_end = ${sqlLeast(this.dialect, "COALESCE(earliest_end, ?)", "?")} WHERE entitlement_id = ?`,
      parameters: [end, end, entitlementId],
    };
  }

  private bool(value: boolean): unknown {
    return sqlBool(this.dialect, value);
  }
}
