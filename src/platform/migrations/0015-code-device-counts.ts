import type { MigrationInterface, QueryRunner } from "typeorm";
import { columnsFor, ownerCountTable } from "./columns.js";

/**
 * A code's devices counted, not scanned (as an entitlement's are since 0014): an activation counted the code's
 * devices up to its `maxDeviceActivations`, so a code for thousands of devices read thousands of index entries
 * under its lock. Counted for codes with a limit of their own (a code's limits never change).
 */
export class CodeDeviceCounts1764950400000 implements MigrationInterface {
  name = "CodeDeviceCounts1764950400000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      ownerCountTable(c, {
        name: "activation_code_device_counts",
        owner: "activation_code_id",
        ownerTable: "activation_codes",
        foreignKey: "fk_activation_code_device_counts_code",
      }),
    );
    await queryRunner.query(
      "INSERT INTO activation_code_device_counts (activation_code_id, held) " +
        "SELECT d.activation_code_id, COUNT(*) FROM activation_code_devices d " +
        "JOIN activation_codes c ON c.id = d.activation_code_id WHERE c.use_entitlement_max_activations = 0 " +
        "GROUP BY d.activation_code_id",
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("activation_code_device_counts");
  }
}
