import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

type Columns = Awaited<ReturnType<typeof columnsFor>>;

/** Every amount of usage recorded: usage transactions and granted pre-allocations, in micro-units. */
function usageRecords(c: Columns): Table {
  return new Table({
    name: "usage_records",
    columns: [
      c.serial(),
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.uuid("asset_id"),
      c.uuid("session_id"),
      // The client's transactionId; NULL for a pre-allocation.
      c.bigint("transaction_id", true),
      // 1: usage transaction, 2: pre-allocation.
      c.int("kind"),
      c.bigint("amount"),
      // The consumption period (or balance period) the amount counts in.
      c.datetime("period_start"),
      c.datetime("occurred_at"),
      c.datetime("recorded_at"),
    ],
    uniques: [{ name: "uq_usage_records_session_transaction", columnNames: ["session_id", "transaction_id"] }],
    indices: [
      // Covers the rebuild's SUM (and MAX) of a period, which runs while its period row is locked.
      { name: "ix_usage_records_asset_period", columnNames: ["asset_id", "period_start", "amount"] },
      { name: "ix_usage_records_entitlement", columnNames: ["entitlement_id", "occurred_at"] },
    ],
  });
}

/**
 * One row per asset and period: the generation fences counters kept in the coordinator (a counter rebuilt
 * from the records takes a new generation, and amounts reserved in an older one are not written).
 */
function usagePeriods(c: Columns): Table {
  return new Table({
    name: "usage_periods",
    columns: [
      { ...c.uuid("asset_id"), isPrimary: true },
      { ...c.datetime("period_start"), isPrimary: true },
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.datetime("period_end", true),
      c.int("generation"),
      // Credit balances: the credits of this balance period, in micro-units; NULL for metered usage.
      c.bigint("credit_total", true),
      c.datetime("created_at"),
    ],
  });
}

/** The status last reported by an event for each asset: events go out once per crossing. */
function usageStatuses(c: Columns): Table {
  return new Table({
    name: "usage_statuses",
    columns: [
      { ...c.uuid("asset_id"), isPrimary: true },
      c.uuid("provider_id"),
      c.datetime("period_start"),
      // NULL for a credit balance; the roll-over job looks at raised statuses whose period has ended.
      c.datetime("period_end", true),
      c.int("status"),
      c.datetime("updated_at"),
    ],
    indices: [{ name: "ix_usage_statuses_raised", columnNames: ["status", "period_end"] }],
  });
}

/** A credit balance's current balance period and its top-ups. */
function usageBalances(c: Columns): Table {
  return new Table({
    name: "usage_balances",
    columns: [
      { ...c.uuid("asset_id"), isPrimary: true },
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.datetime("period_start"),
      c.datetime("last_deposit_at", true),
      c.datetime("last_auto_balance_at", true),
      // When the auto-balance schedule next tops the balance up; NULL without a schedule.
      c.datetime("next_auto_balance_at", true),
      c.datetime("created_at"),
    ],
    indices: [{ name: "ix_usage_balances_next_auto", columnNames: ["next_auto_balance_at"] }],
  });
}

/** Log entries and metric samples sent by running applications. */
function sessionRecords(c: Columns, name: string): Table {
  return new Table({
    name,
    columns: [
      c.serial(),
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.uuid("session_id"),
      // NULL when the item carried none (never deduplicated).
      c.bigint("transaction_id", true),
      c.string("event_name", 128),
      c.text("event_data"),
      c.datetime("occurred_at"),
      c.datetime("recorded_at"),
    ],
    uniques: [{ name: `uq_${name}_session_transaction`, columnNames: ["session_id", "transaction_id"] }],
    indices: [{ name: `ix_${name}_session_occurred`, columnNames: ["session_id", "occurred_at"] }],
  });
}

function ratings(c: Columns): Table {
  return new Table({
    name: "ratings",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.uuid("session_id"),
      c.uuid("product_id"),
      c.uuid("feature_id", true),
      c.int("rating"),
      c.string("remark", 2000, true),
      c.datetime("created_at"),
    ],
    indices: [
      { name: "ix_ratings_provider_created", columnNames: ["provider_id", "created_at"] },
      { name: "ix_ratings_provider_product", columnNames: ["provider_id", "product_id", "created_at"] },
    ],
  });
}

export class Usage1764518400000 implements MigrationInterface {
  name = "Usage1764518400000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    const tables = [
      usageRecords(c),
      usagePeriods(c),
      usageStatuses(c),
      usageBalances(c),
      sessionRecords(c, "session_logs"),
      sessionRecords(c, "session_metrics"),
      ratings(c),
    ];
    for (const table of tables) await queryRunner.createTable(table);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const names = [
      "ratings",
      "session_metrics",
      "session_logs",
      "usage_balances",
      "usage_statuses",
      "usage_periods",
      "usage_records",
    ];
    for (const name of names) await queryRunner.dropTable(name);
  }
}
