import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

/**
 * Node-locked seats counted, not scanned: an activation counted its entitlement's devices (up to its seats) under
 * the entitlement's lock, so with thousands of devices each activation read thousands of index entries. Each
 * entitlement's devices are now counted in `entitlement_device_counts.held`, changed with them, under that lock.
 */
export class EntitlementDeviceCounts1764864000000 implements MigrationInterface {
  name = "EntitlementDeviceCounts1764864000000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: "entitlement_device_counts",
        columns: [{ ...c.uuid("entitlement_id"), isPrimary: true }, c.int("held")],
        foreignKeys: [
          {
            name: "fk_entitlement_device_counts_entitlement",
            columnNames: ["entitlement_id"],
            referencedTableName: "entitlements",
            referencedColumnNames: ["id"],
            onDelete: "CASCADE",
          },
        ],
      }),
    );
    await queryRunner.query(
      "INSERT INTO entitlement_device_counts (entitlement_id, held) " +
        "SELECT entitlement_id, COUNT(*) FROM entitlement_devices GROUP BY entitlement_id",
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("entitlement_device_counts");
  }
}
