import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

type Columns = Awaited<ReturnType<typeof columnsFor>>;

const cascadeTo = (table: string, column: string, name: string) => ({
  name,
  columnNames: [column],
  referencedTableName: table,
  referencedColumnNames: ["id"],
  onDelete: "CASCADE",
});

function entitlements(c: Columns): Table {
  return new Table({
    name: "entitlements",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.string("name", 255),
      c.text("description"),
      c.string("version", 64),
      c.text("legal_notice_html"),
      c.string("customer_contact_email", 320),
      c.string("customer_contact_name", 255),
      c.string("customer_id", 36),
      c.boolean("allow_license_activation"),
      // NULL when empty: unique per provider only when set.
      c.code("license_key", 255, true),
      c.datetime("expiration_date_time", true),
      c.boolean("is_entitlement_trial"),
      c.boolean("is_revoked"),
      c.boolean("is_template"),
      // Set only on templates (name and version): a (name, version) pair is unique among a provider's templates.
      c.string("template_name", 255, true),
      c.string("template_version", 64, true),
      c.string("order_id", 255),
      c.string("reference", 255),
      // ActivationPolicy in protobuf JSON, or NULL.
      c.text("activation_policy"),
      c.int("revision"),
      c.datetime("created_at"),
      c.datetime("updated_at"),
    ],
    uniques: [
      { name: "uq_entitlements_provider_license_key", columnNames: ["provider_id", "license_key"] },
      { name: "uq_entitlements_provider_template", columnNames: ["provider_id", "template_name", "template_version"] },
    ],
    indices: [{ name: "ix_entitlements_provider_created", columnNames: ["provider_id", "created_at"] }],
  });
}

function entitlementProducts(c: Columns): Table {
  return new Table({
    name: "entitlement_products",
    columns: [
      { ...c.uuid("entitlement_id"), isPrimary: true },
      { ...c.uuid("product_id"), isPrimary: true },
      c.int("position"),
    ],
    foreignKeys: [cascadeTo("entitlements", "entitlement_id", "fk_entitlement_products_entitlement")],
  });
}

function entitlementFeatures(c: Columns): Table {
  return new Table({
    name: "entitlement_features",
    columns: [
      c.id(),
      c.uuid("entitlement_id"),
      c.uuid("product_id"),
      // The catalog feature it was copied from.
      c.uuid("source_feature_id"),
      c.code("feature_code", 128, true),
      c.string("module_name", 255),
      c.string("feature_path", 512),
      c.string("name", 255),
      c.text("description"),
      c.text("value"),
      c.string("version", 64),
      c.boolean("is_enabled"),
      c.boolean("is_available_during_trial_period"),
      c.boolean("is_available_during_grace_period"),
      c.boolean("can_modify_value_on_entitlement"),
      c.boolean("can_modify_enabled_on_entitlement"),
      c.uuid("metered_asset_id", true),
      c.datetime("feature_expiration", true),
      c.datetime("created_at"),
      c.datetime("updated_at"),
    ],
    indices: [{ name: "ix_entitlement_features_entitlement", columnNames: ["entitlement_id"] }],
    foreignKeys: [cascadeTo("entitlements", "entitlement_id", "fk_entitlement_features_entitlement")],
  });
}

function activationCodes(c: Columns): Table {
  return new Table({
    name: "activation_codes",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      // As issued (shown to the vendor); `code_key` is the form looked up.
      c.string("code", 64),
      // Upper case without dashes or spaces. Unique across providers: anonymous activation finds the code alone.
      c.code("code_key", 64),
      c.int("required_authentication_level"),
      c.string("email", 320),
      c.string("user_id", 36),
      c.string("organization_group_id", 36),
      c.string("fingerprint", 512),
      // JSON array of the pre-authorized device fingerprints.
      c.text("pre_authorized_devices"),
      c.int("max_device_activations"),
      c.int("activation_code_use_count"),
      c.int("max_activation_code_use_count"),
      c.int("verification_code_use_count"),
      c.int("max_verification_code_use_count"),
      c.boolean("user_consent"),
      c.boolean("requires_user_consent"),
      c.boolean("send_user_notification"),
      c.boolean("is_trial_activation"),
      c.boolean("use_entitlement_max_activations"),
      c.boolean("is_deleted"),
      c.datetime("activation_time_stamp", true),
      c.datetime("expiration_time_stamp", true),
      c.datetime("created_at"),
    ],
    uniques: [{ name: "uq_activation_codes_code_key", columnNames: ["code_key"] }],
    indices: [{ name: "ix_activation_codes_entitlement", columnNames: ["entitlement_id", "created_at"] }],
    foreignKeys: [cascadeTo("entitlements", "entitlement_id", "fk_activation_codes_entitlement")],
  });
}

/** Every device ever activated with a code: its device limit counts these. */
function activationCodeDevices(c: Columns): Table {
  return new Table({
    name: "activation_code_devices",
    columns: [
      { ...c.uuid("activation_code_id"), isPrimary: true },
      // SHA-256 of the fingerprint, hex.
      { ...c.code("fingerprint_hash", 64), isPrimary: true },
      c.string("fingerprint", 512),
      c.datetime("created_at"),
    ],
    foreignKeys: [cascadeTo("activation_codes", "activation_code_id", "fk_activation_code_devices_code")],
  });
}

/** Node-locked seats: each distinct device holding one of an entitlement's seats. */
function entitlementDevices(c: Columns): Table {
  return new Table({
    name: "entitlement_devices",
    columns: [
      { ...c.uuid("entitlement_id"), isPrimary: true },
      { ...c.code("fingerprint_hash", 64), isPrimary: true },
      c.string("fingerprint", 512),
      c.uuid("activation_code_id"),
      c.datetime("created_at"),
    ],
    foreignKeys: [cascadeTo("entitlements", "entitlement_id", "fk_entitlement_devices_entitlement")],
  });
}

function licenseSessions(c: Columns): Table {
  return new Table({
    name: "license_sessions",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.uuid("entitlement_id"),
      c.uuid("activation_code_id"),
      c.string("fingerprint", 512),
      c.code("fingerprint_hash", 64),
      // LicenseSessionState: 1 live (lapsed when grace_ends_at has passed), 3 released, 4 ended.
      c.int("state"),
      c.boolean("is_floating"),
      c.datetime("activated_at"),
      c.datetime("lease_expires_at"),
      c.datetime("grace_ends_at"),
      c.datetime("last_check_in_at"),
      c.string("software_version", 255),
      c.string("client_address", 64),
      c.datetime("ended_at", true),
    ],
    indices: [
      { name: "ix_license_sessions_seats", columnNames: ["entitlement_id", "state", "grace_ends_at"] },
      { name: "ix_license_sessions_device", columnNames: ["entitlement_id", "fingerprint_hash", "state"] },
      { name: "ix_license_sessions_activated", columnNames: ["entitlement_id", "activated_at"] },
    ],
    foreignKeys: [cascadeTo("entitlements", "entitlement_id", "fk_license_sessions_entitlement")],
  });
}

/** Each provider's license-token signing keys (Ed25519), the private key sealed like the access-token keys. */
function licenseSigningKeys(c: Columns): Table {
  return new Table({
    name: "license_signing_keys",
    columns: [
      { ...c.code("kid", 64), isPrimary: true },
      c.uuid("provider_id"),
      c.string("algorithm", 16),
      // Base64 SPKI DER: what an application verifies with.
      c.text("public_key_spki"),
      c.text("sealed_private_key"),
      c.datetime("created_at"),
      c.datetime("retired_at", true),
    ],
    indices: [{ name: "ix_license_signing_keys_provider", columnNames: ["provider_id", "created_at"] }],
  });
}

export class LicensingSchema1763913600000 implements MigrationInterface {
  name = "LicensingSchema1763913600000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    for (const table of [
      entitlements(c),
      entitlementProducts(c),
      entitlementFeatures(c),
      activationCodes(c),
      activationCodeDevices(c),
      entitlementDevices(c),
      licenseSessions(c),
      licenseSigningKeys(c),
    ]) {
      await queryRunner.createTable(table);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const name of [
      "license_signing_keys",
      "license_sessions",
      "entitlement_devices",
      "activation_code_devices",
      "activation_codes",
      "entitlement_features",
      "entitlement_products",
      "entitlements",
    ]) {
      await queryRunner.dropTable(name);
    }
  }
}
