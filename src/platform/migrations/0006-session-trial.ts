import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";

/** A session remembers whether its activation was a trial (a trial code counts even on a paid entitlement). */
const IS_TRIAL = new TableColumn({ name: "is_trial", type: "boolean", isNullable: false, default: false });

export class SessionTrial1764172800000 implements MigrationInterface {
  name = "SessionTrial1764172800000";

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn("license_sessions", IS_TRIAL);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn("license_sessions", IS_TRIAL.name);
  }
}
