import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";

/**
 * When an asset's status must be looked at again: a write saw a crossing that writes still in flight complete.
 * Kept with the status, in that write's transaction, so the look survives the instance that was to make it.
 */
export class UsageStatusRecheck1764604800000 implements MigrationInterface {
  name = "UsageStatusRecheck1764604800000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const mysql = queryRunner.connection.options.type === "mysql";
    await queryRunner.addColumn(
      "usage_statuses",
      new TableColumn({ name: "recheck_at", type: "datetime", ...(mysql ? { precision: 3 } : {}), isNullable: true }),
    );
    await queryRunner.createIndex(
      "usage_statuses",
      new TableIndex({ name: "ix_usage_statuses_recheck", columnNames: ["recheck_at"] }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex("usage_statuses", "ix_usage_statuses_recheck");
    await queryRunner.dropColumn("usage_statuses", "recheck_at");
  }
}
