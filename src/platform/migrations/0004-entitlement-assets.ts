import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableUnique } from "typeorm/schema-builder/table/TableUnique.js";

const TABLE = "monitored_assets";
const OLD_RULE = "uq_monitored_assets_product_metric";

/**
 * Lets an entitlement own copies of its products' monitored assets: a metric name is unique among a product's
 * own assets (entitlement_id NULL) and, separately, among each entitlement's copies of that product's assets.
 */
export class EntitlementAssets1764000000000 implements MigrationInterface {
  name = "EntitlementAssets1764000000000";

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") {
      // No partial indexes on MySQL/MariaDB: a stored column makes NULL (the product's own) one scope of its
      // own. It is not an entity column, so inserts never write it. One statement: all of it applies or none.
      await queryRunner.query(
        `ALTER TABLE ${TABLE}
          ADD COLUMN asset_scope VARCHAR(36) AS (COALESCE(entitlement_id, '')) STORED,
          ADD UNIQUE INDEX uq_monitored_assets_product_scope_metric (product_id, asset_scope, metric_name),
          ADD INDEX ix_monitored_assets_entitlement (entitlement_id),
          DROP INDEX ${OLD_RULE}`,
      );
      return;
    }
    // A table-level UNIQUE on SQLite: dropping it rebuilds the table, rows copied.
    await queryRunner.dropUniqueConstraint(TABLE, OLD_RULE);
    await queryRunner.query(
      `CREATE UNIQUE INDEX ${OLD_RULE} ON ${TABLE} (product_id, metric_name) WHERE entitlement_id IS NULL`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX uq_monitored_assets_entitlement_metric ON ${TABLE} (entitlement_id, product_id, metric_name) WHERE entitlement_id IS NOT NULL`,
    );
  }

  /** Refused (and nothing changed) while an entitlement holds a copy beside its product's asset. */
  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === "mysql") {
      await queryRunner.query(
        `ALTER TABLE ${TABLE}
          ADD UNIQUE INDEX ${OLD_RULE} (product_id, metric_name),
          DROP INDEX uq_monitored_assets_product_scope_metric,
          DROP INDEX ix_monitored_assets_entitlement,
          DROP COLUMN asset_scope`,
      );
      return;
    }
    await queryRunner.query("DROP INDEX uq_monitored_assets_entitlement_metric");
    await queryRunner.query(`DROP INDEX ${OLD_RULE}`);
    await queryRunner.createUniqueConstraint(
      TABLE,
      new TableUnique({ name: OLD_RULE, columnNames: ["product_id", "metric_name"] }),
    );
  }
}
