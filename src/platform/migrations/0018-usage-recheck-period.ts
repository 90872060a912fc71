import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";

/**
 * The period a stored look-again is for: a crossing seen just before its period ended is looked at in that
 * period, not in the one current when the scheduler makes the look.
 */
export class UsageRecheckPeriod1765209600000 implements MigrationInterface {
  name = "UsageRecheckPeriod1765209600000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const mysql = queryRunner.connection.options.type === "mysql";
    await queryRunner.addColumn(
      "usage_statuses",
      new TableColumn({
        name: "recheck_period_start",
        type: "datetime",
        ...(mysql ? { precision: 3 } : {}),
        isNullable: true,
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn("usage_statuses", "recheck_period_start");
  }
}
