import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

/**
 * Invalidations an instance could not publish on Redis (it could not reach it), written here instead and read by
 * every instance each second (see `invalidation-log.ts`), so a change made through that instance reaches the
 * others' caches in about a second rather than when their copies expire. Rows are kept for ten minutes.
 */
export class CacheInvalidations1765123200000 implements MigrationInterface {
  name = "CacheInvalidations1765123200000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: "cache_invalidations",
        columns: [c.serial(), c.code("channel", 64), c.code("message", 255), c.datetime("created_at")],
        indices: [{ name: "ix_cache_invalidations_created", columnNames: ["created_at"] }],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable("cache_invalidations");
  }
}
