import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Codes issued before 2026-11-29 with pre-authorized devices and `maxDeviceActivations` left at 0 were held to one
 * device, so only the first of the devices listed could activate. Codes issued since get the number of their
 * pre-authorized devices as their limit; this gives the earlier ones the same. Not undone: once set, a limit left
 * at 0 cannot be told from one given.
 */
export class PreAuthorizedDeviceLimits1765296000000 implements MigrationInterface {
  name = "PreAuthorizedDeviceLimits1765296000000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const length = queryRunner.connection.options.type === "mysql" ? "JSON_LENGTH" : "json_array_length";
    await queryRunner.query(
      `UPDATE activation_codes SET max_device_activations = ${length}(pre_authorized_devices) ` +
        "WHERE max_device_activations = 0 AND pre_authorized_devices IS NOT NULL",
    );
  }

  async down(): Promise<void> {}
}
