import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";

/**
 * When a subscription's endpoint first answered its challenge: one that was verified before keeps receiving
 * events (parked) while it is verified again after a URL change or re-enabling. Existing Active and Suspended
 * subscriptions were verified.
 */
export class SubscriptionVerified1764432000000 implements MigrationInterface {
  name = "SubscriptionVerified1764432000000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const mysql = queryRunner.connection.options.type === "mysql";
    await queryRunner.addColumn(
      "webhook_subscriptions",
      new TableColumn({ name: "verified_at", type: "datetime", ...(mysql ? { precision: 3 } : {}), isNullable: true }),
    );
    await queryRunner.query("UPDATE webhook_subscriptions SET verified_at = created_at WHERE state IN (2, 4)");
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn("webhook_subscriptions", "verified_at");
  }
}
