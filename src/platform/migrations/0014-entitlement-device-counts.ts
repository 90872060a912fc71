import type { MigrationInterface, QueryRunner } from "typeorm";
import { columnsFor, ownerCountTable } from "./columns.js";

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
      ownerCountTable(c, {
        name: "entitlement_device_counts",
        owner: "entitlement_id",
        ownerTable: "entitlements",
        foreignKey: "fk_entitlement_device_counts_entitlement",
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
