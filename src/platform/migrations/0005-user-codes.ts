import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";

/** Interactive-user activation finds the codes inviting a user, or one of their groups, without a table scan. */
const INDICES = [
  new TableIndex({ name: "ix_activation_codes_user", columnNames: ["user_id"] }),
  new TableIndex({ name: "ix_activation_codes_group", columnNames: ["organization_group_id"] }),
];

export class UserCodes1764086400000 implements MigrationInterface {
  name = "UserCodes1764086400000";

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const index of INDICES) await queryRunner.createIndex("activation_codes", index);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const index of INDICES) await queryRunner.dropIndex("activation_codes", index.name as string);
  }
}
