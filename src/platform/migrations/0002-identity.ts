import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

/** The provider that owned every row before providers existed; the bootstrap provider. */
const DEFAULT_PROVIDER_ID = "00000000-0000-4000-8000-000000000000";

export class IdentitySchema1763827200000 implements MigrationInterface {
  name = "IdentitySchema1763827200000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      new Table({ name: "providers", columns: [c.id(), c.string("name", 255), c.datetime("created_at")] }),
    );
    await queryRunner.createTable(
      new Table({
        name: "oauth_clients",
        columns: [
          { ...c.code("client_id", 64), isPrimary: true },
          c.uuid("provider_id"),
          c.string("name", 255),
          c.text("scopes"),
          c.string("secret_hash", 255),
          c.boolean("disabled"),
          // Random; replaced when the client is disabled or its secret rotated. Tokens carry it (claim `gen`).
          c.code("token_generation", 32),
          c.datetime("created_at"),
          c.datetime("last_used_at", true),
        ],
        indices: [{ name: "ix_oauth_clients_provider", columnNames: ["provider_id", "created_at"] }],
        foreignKeys: [
          {
            name: "fk_oauth_clients_provider",
            columnNames: ["provider_id"],
            referencedTableName: "providers",
            referencedColumnNames: ["id"],
          },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: "signing_keys",
        columns: [
          { ...c.code("kid", 64), isPrimary: true },
          // Insertion order, given by the database (MAX + 1 under the signing-keys lock): never a caller's clock.
          c.int("seq"),
          c.string("algorithm", 16),
          c.text("public_jwk"),
          c.text("private_jwk"),
          // Stamped by the first service instance that loads the key, with its own clock; null until then.
          c.datetime("published_at", true),
          c.datetime("retired_at", true),
        ],
        uniques: [{ name: "uq_signing_keys_seq", columnNames: ["seq"] }],
      }),
    );
    await queryRunner.query("INSERT INTO providers (id, name, created_at) VALUES (?, ?, ?)", [
      DEFAULT_PROVIDER_ID,
      "Default provider",
      new Date().toISOString().slice(0, 19).replace("T", " "),
    ]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("signing_keys");
    await queryRunner.dropTable("oauth_clients");
    await queryRunner.dropTable("providers");
  }
}
