import type { QueryRunner } from "typeorm";
import type { TableColumnOptions } from "typeorm/schema-builder/options/TableColumnOptions.js";

/** Column builders for migrations that run unchanged on MySQL/MariaDB and SQLite. */
export function columnsFor(queryRunner: QueryRunner) {
  const mysql = queryRunner.connection.options.type === "mysql";
  return {
    id: (name = "id"): TableColumnOptions => ({ name, type: "varchar", length: "36", isPrimary: name === "id" }),
    uuid: (name: string, nullable = false): TableColumnOptions => ({
      name,
      type: "varchar",
      length: "36",
      isNullable: nullable,
    }),
    /** Identifiers compared byte for byte (case-sensitive) on every database. */
    code: (name: string, length: number, nullable = false): TableColumnOptions => ({
      name,
      type: "varchar",
      length: String(length),
      isNullable: nullable,
      ...(mysql ? { charset: "utf8mb4", collation: "utf8mb4_bin" } : {}),
    }),
    string: (name: string, length: number, nullable = false): TableColumnOptions => ({
      name,
      type: "varchar",
      length: String(length),
      isNullable: nullable,
    }),
    text: (name: string): TableColumnOptions => ({ name, type: mysql ? "mediumtext" : "text", isNullable: true }),
    int: (name: string): TableColumnOptions => ({ name, type: "int", isNullable: false }),
    boolean: (name: string): TableColumnOptions => ({ name, type: "boolean", isNullable: false }),
    datetime: (name: string, nullable = false): TableColumnOptions => ({
      name,
      type: "datetime",
      ...(mysql ? { precision: 3 } : {}),
      isNullable: nullable,
    }),
  };
}
