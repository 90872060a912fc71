import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";
import { TableUnique } from "typeorm/schema-builder/table/TableUnique.js";

const UNIQUE_NAME = "uq_usage_records_session_transaction";
const UNIQUE_COLUMNS = ["session_id", "transaction_id"];

/**
 * On SQLite, the unique index of usage records' transaction ids holds only the records that have one. A
 * pre-allocation has none, yet had an entry under its session: a group of grants over many sessions dirtied a
 * page of that index per session, each written whole to the WAL at commit (a group of 31 grants over 64 sessions,
 * 16 entitlements: 67 µs a row with the entries, 42 µs without). SQLite keeps a table's UNIQUE constraint in its
 * table, so the table is rebuilt from its own definition, its rows and AUTOINCREMENT sequence kept. MySQL has no
 * partial index: unchanged.
 */
export class UsageTransactionIndex1765036800000 implements MigrationInterface {
  name = "UsageTransactionIndex1765036800000";

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") return;
    const table = await usageRecords(queryRunner);
    const partial = new TableIndex({
      name: UNIQUE_NAME,
      columnNames: UNIQUE_COLUMNS,
      isUnique: true,
      where: '"transaction_id" IS NOT NULL',
    });
    await rebuild(queryRunner, table, [], [...table.indices, partial]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") return;
    const table = await usageRecords(queryRunner);
    const unique = new TableUnique({ name: UNIQUE_NAME, columnNames: UNIQUE_COLUMNS });
    const indexes = table.indices.filter((index) => index.name !== UNIQUE_NAME);
    await rebuild(queryRunner, table, [unique], indexes);
  }
}

async function usageRecords(queryRunner: QueryRunner): Promise<Table> {
  const table = await queryRunner.getTable("usage_records");
  if (!table) throw new Error("usage_records is missing");
  return table;
}

/** usage_records made again with its columns, these UNIQUE constraints and then these indexes. */
async function rebuild(queryRunner: QueryRunner, table: Table, uniques: TableUnique[], indexes: TableIndex[]) {
  const rebuilt = new Table({ name: "usage_records_rebuilt", columns: table.columns, uniques });
  await queryRunner.createTable(rebuilt, false, false, false);
  await queryRunner.query('INSERT INTO "usage_records_rebuilt" SELECT * FROM "usage_records"');
  await queryRunner.query(
    "UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'usage_records') " +
      "WHERE name = 'usage_records_rebuilt'",
  );
  await queryRunner.query('DROP TABLE "usage_records"');
  await queryRunner.query('ALTER TABLE "usage_records_rebuilt" RENAME TO "usage_records"');
  for (const index of indexes) await queryRunner.createIndex("usage_records", index);
}
