import type { MigrationInterface, QueryRunner } from "typeorm";
import { TableColumn } from "typeorm/schema-builder/table/TableColumn.js";
import { columnsFor } from "./columns.js";

/** What a provider's licenses say of it: a copyright line, a web address and a contact email (`providers update`). */
export class ProviderNotices1765382400000 implements MigrationInterface {
  name = "ProviderNotices1765382400000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    const columns = [c.string("copyright", 255, true), c.string("url", 2048, true), c.string("email", 320, true)];
    await queryRunner.addColumns(
      "providers",
      columns.map((column) => new TableColumn(column)),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Plain ALTER TABLE: TypeORM's SQLite dropColumn rebuilds the table, which the clients' foreign key refuses.
    for (const column of ["email", "url", "copyright"]) {
      await queryRunner.query(`ALTER TABLE providers DROP COLUMN ${column}`);
    }
  }
}
