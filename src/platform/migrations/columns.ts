import type { QueryRunner } from "typeorm";
import type { TableColumnOptions } from "typeorm/schema-builder/options/TableColumnOptions.js";
import { Table } from "typeorm/schema-builder/table/Table.js";

/** Exact collations, best first: code-point order, no case or accent folding, trailing spaces significant. */
const EXACT_COLLATIONS = ["utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin"];

/**
 * Column builders for migrations that run unchanged on MySQL/MariaDB and SQLite. On MySQL every text column
 * is utf8mb4 with an exact collation whatever the database's defaults, so text compares and sorts as on SQLite.
 */
export async function columnsFor(queryRunner: QueryRunner) {
  const mysql = queryRunner.connection.options.type === "mysql";
  const exact = mysql ? { charset: "utf8mb4", collation: await exactCollation(queryRunner) } : {};
  const varchar = (name: string, length: number, nullable: boolean): TableColumnOptions => ({
    name,
    type: "varchar",
    length: String(length),
    isNullable: nullable,
    ...exact,
  });
  return {
    id: (name = "id"): TableColumnOptions => ({ name, type: "varchar", length: "36", isPrimary: name === "id" }),
    uuid: (name: string, nullable = false): TableColumnOptions => ({
      name,
      type: "varchar",
      length: "36",
      isNullable: nullable,
    }),
    /** Identifiers: compared byte for byte (case-sensitive). */
    code: (name: string, length: number, nullable = false) => varchar(name, length, nullable),
    string: (name: string, length: number, nullable = false) => varchar(name, length, nullable),
    text: (name: string): TableColumnOptions => ({
      name,
      type: mysql ? "mediumtext" : "text",
      isNullable: true,
      ...exact,
    }),
    int: (name: string): TableColumnOptions => ({ name, type: "int", isNullable: false }),
    /** Exact integers beyond 2^31 (micro-units of usage, transaction ids). */
    bigint: (name: string, nullable = false): TableColumnOptions => ({
      name,
      type: mysql ? "bigint" : "integer",
      isNullable: nullable,
    }),
    /** An auto-increment primary key: rows inserted in bulk stay in insertion order on disk. */
    serial: (name = "id"): TableColumnOptions => ({
      name,
      type: mysql ? "bigint" : "integer",
      isPrimary: true,
      isGenerated: true,
      generationStrategy: "increment",
    }),
    boolean: (name: string): TableColumnOptions => ({ name, type: "boolean", isNullable: false }),
    datetime: (name: string, nullable = false): TableColumnOptions => ({
      name,
      type: "datetime",
      ...(mysql ? { precision: 3 } : {}),
      isNullable: nullable,
    }),
  };
}

async function exactCollation(queryRunner: QueryRunner): Promise<string> {
  const rows = (await queryRunner.query("SHOW COLLATION WHERE Charset = 'utf8mb4'")) as { Collation: string }[];
  const available = new Set(rows.map((row) => row.Collation));
  return EXACT_COLLATIONS.find((collation) => available.has(collation)) ?? "utf8mb4_bin";
}

/**
 * A table counting what each owner holds (`held`, and any `more` columns), keyed by the owner's id and deleted
 * with the owner.
 */
export function ownerCountTable(
  c: Awaited<ReturnType<typeof columnsFor>>,
  table: { name: string; owner: string; ownerTable: string; foreignKey: string; more?: TableColumnOptions[] },
): Table {
  return new Table({
    name: table.name,
    columns: [{ ...c.uuid(table.owner), isPrimary: true }, c.int("held"), ...(table.more ?? [])],
    foreignKeys: [
      {
        name: table.foreignKey,
        columnNames: [table.owner],
        referencedTableName: table.ownerTable,
        referencedColumnNames: ["id"],
        onDelete: "CASCADE",
      },
    ],
  });
}
