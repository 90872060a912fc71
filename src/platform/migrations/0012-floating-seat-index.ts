import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";

const NAME = "ix_license_sessions_seats";
const SEATS_BEFORE = ["entitlement_id", "state", "grace_ends_at"];
const SEATS = ["entitlement_id", "state", "is_floating", "grace_ends_at"];

/**
 * The floating-seat count of an activation filters on is_floating too: without it in the index, each live
 * session the count passes was one more read of its row, so an activation's cost grew with the sessions live.
 */
export class FloatingSeatIndex1764691200000 implements MigrationInterface {
  name = "FloatingSeatIndex1764691200000";

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex("license_sessions", NAME);
    await queryRunner.createIndex("license_sessions", new TableIndex({ name: NAME, columnNames: SEATS }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex("license_sessions", NAME);
    await queryRunner.createIndex("license_sessions", new TableIndex({ name: NAME, columnNames: SEATS_BEFORE }));
  }
}
