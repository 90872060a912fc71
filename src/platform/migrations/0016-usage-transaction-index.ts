import type { MigrationInterface, QueryRunner } from "typeorm";

const COLUMNS =
  '"id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "provider_id" varchar(36) NOT NULL, ' +
  '"entitlement_id" varchar(36) NOT NULL, "asset_id" varchar(36) NOT NULL, "session_id" varchar(36) NOT NULL, ' +
  '"transaction_id" integer, "kind" int NOT NULL, "amount" integer NOT NULL, "period_start" datetime NOT NULL, ' +
  '"occurred_at" datetime NOT NULL, "recorded_at" datetime NOT NULL';
const UNIQUE = 'CONSTRAINT "uq_usage_records_session_transaction" UNIQUE ("session_id", "transaction_id")';
const INDEXES = [
  'CREATE INDEX "ix_usage_records_asset_period" ON "usage_records" ("asset_id", "period_start", "amount")',
  'CREATE INDEX "ix_usage_records_entitlement" ON "usage_records" ("entitlement_id", "occurred_at")',
];
const PARTIAL_UNIQUE =
  'CREATE UNIQUE INDEX "uq_usage_records_session_transaction" ON "usage_records" ("session_id", "transaction_id") ' +
  'WHERE "transaction_id" IS NOT NULL';

/**
 * On SQLite, the unique index of usage records' transaction ids holds only the records that have one. A
 * pre-allocation has none, yet had an entry under its session: a group of grants over many sessions dirtied a
 * page of that index per session, each written whole to the WAL at commit (a group of 31 grants over 64 sessions,
 * 16 entitlements: 67 µs a row with the entries, 42 µs without). SQLite keeps a table's UNIQUE constraint in its
 * table, so the table is rebuilt, its rows and AUTOINCREMENT sequence kept. MySQL has no partial index: unchanged.
 */
export class UsageTransactionIndex1765036800000 implements MigrationInterface {
  name = "UsageTransactionIndex1765036800000";

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") return;
    await rebuild(queryRunner, COLUMNS, [...INDEXES, PARTIAL_UNIQUE]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") return;
    await rebuild(queryRunner, `${COLUMNS}, ${UNIQUE}`, INDEXES);
  }
}

/** usage_records made again with these columns and constraints, then these indexes. */
async function rebuild(queryRunner: QueryRunner, definition: string, indexes: string[]): Promise<void> {
  await queryRunner.query(`CREATE TABLE "usage_records_rebuilt" (${definition})`);
  await queryRunner.query('INSERT INTO "usage_records_rebuilt" SELECT * FROM "usage_records"');
  await queryRunner.query(
    "UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'usage_records') " +
      "WHERE name = 'usage_records_rebuilt'",
  );
  await queryRunner.query('DROP TABLE "usage_records"');
  await queryRunner.query('ALTER TABLE "usage_records_rebuilt" RENAME TO "usage_records"');
  for (const index of indexes) await queryRunner.query(index);
}
