import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { TableIndex } from "typeorm/schema-builder/table/TableIndex.js";
import { columnsFor } from "./columns.js";

/** Expiry notices sent: one per entitlement, kind and deadline (a moved deadline gets a notice of its own). */
export class EntitlementNotices1764345600000 implements MigrationInterface {
  name = "EntitlementNotices1764345600000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: "entitlement_notices",
        columns: [
          { ...c.uuid("entitlement_id"), isPrimary: true },
          { ...c.code("kind", 32), isPrimary: true },
          { ...c.datetime("due_at"), isPrimary: true },
          c.datetime("created_at"),
        ],
        foreignKeys: [
          {
            name: "fk_entitlement_notices_entitlement",
            columnNames: ["entitlement_id"],
            referencedTableName: "entitlements",
            referencedColumnNames: ["id"],
            onDelete: "CASCADE",
          },
        ],
      }),
    );
    await queryRunner.createIndex(
      "entitlements",
      new TableIndex({ name: "ix_entitlements_expiration", columnNames: ["expiration_date_time"] }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex("entitlements", "ix_entitlements_expiration");
    await queryRunner.dropTable("entitlement_notices");
  }
}
