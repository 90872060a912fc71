import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

export class CatalogSchema1763740800000 implements MigrationInterface {
  name = "CatalogSchema1763740800000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: "products",
        columns: [
          c.id(),
          c.uuid("provider_id"),
          c.int("status"),
          c.string("name", 255),
          c.text("description"),
          c.code("product_code", 128),
          c.code("product_version", 64),
          c.datetime("expiration_date", true),
          c.string("external_id", 255),
          c.text("product_information"),
          c.text("property_values"),
          c.boolean("is_deleted"),
          c.boolean("is_locked"),
          c.text("product_meta_data"),
          c.text("product_license_data"),
          c.int("revision_number"),
          c.datetime("created_at"),
          c.datetime("updated_at"),
        ],
        uniques: [
          { name: "uq_products_provider_code", columnNames: ["provider_id", "product_code"] },
          {
            name: "uq_products_provider_code_version",
            columnNames: ["provider_id", "product_code", "product_version"],
          },
        ],
        indices: [{ name: "ix_products_provider_created", columnNames: ["provider_id", "created_at"] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: "features",
        columns: [
          c.id(),
          c.uuid("product_id"),
          c.code("feature_code", 128, true),
          c.string("feature_path", 512),
          c.string("module_name", 255),
          c.string("name", 255),
          c.text("description"),
          c.text("value"),
          c.string("version", 64),
          c.string("usage_metric", 255),
          c.string("units", 64),
          c.string("type", 64),
          c.boolean("is_enabled"),
          c.boolean("is_available_during_trial_period"),
          c.boolean("is_available_during_grace_period"),
          c.boolean("can_modify_value_on_entitlement"),
          c.boolean("can_modify_enabled_on_entitlement"),
          c.uuid("metered_asset_id", true),
          c.boolean("is_deleted"),
          c.int("revision_number"),
          c.datetime("created_at"),
          c.datetime("updated_at"),
        ],
        uniques: [{ name: "uq_features_product_code", columnNames: ["product_id", "feature_code"] }],
        foreignKeys: [
          {
            name: "fk_features_product",
            columnNames: ["product_id"],
            referencedTableName: "products",
            referencedColumnNames: ["id"],
            onDelete: "CASCADE",
          },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: "monitored_assets",
        columns: [
          c.id(),
          c.uuid("product_id"),
          c.uuid("entitlement_id", true),
          c.code("metric_name", 128),
          c.string("name", 255),
          c.text("description"),
          c.string("unit", 64),
          c.string("category", 128),
          c.string("number_format", 64),
          c.int("metric_type"),
          c.string("allowed_back_dating_tolerance", 32, true),
          c.text("metered_usage"),
          c.text("balance_usage"),
          c.datetime("created_at"),
          c.datetime("updated_at"),
        ],
        uniques: [{ name: "uq_monitored_assets_product_metric", columnNames: ["product_id", "metric_name"] }],
        foreignKeys: [
          {
            name: "fk_monitored_assets_product",
            columnNames: ["product_id"],
            referencedTableName: "products",
            referencedColumnNames: ["id"],
            onDelete: "CASCADE",
          },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("monitored_assets");
    await queryRunner.dropTable("features");
    await queryRunner.dropTable("products");
  }
}
