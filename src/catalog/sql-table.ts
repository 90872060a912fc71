import type { DataSource, EntityManager, EntitySchema } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { runStandalone } from "../platform/standalone-statement.js";
import type { Statement } from "../platform/statement-batch.js";

/** Rows per multi-row INSERT: well under every driver's limit of bound parameters. */
const INSERT_CHUNK = 100;

/**
 * Plain SQL for one entity's table, with the SQL text built once: reads and writes skip TypeORM's query
 * builder, while values are still converted by the driver exactly as TypeORM stores and loads them.
 */
export class SqlTable<Row extends { id: string }> {
  readonly name: string;
  readonly columns: ColumnMetadata[];
  /** `a, b, c` in entity order. */
  readonly columnList: string;
  private readonly updateSql: string;
  private readonly insertSql = new Map<number, string>();

  constructor(
    private readonly dataSource: DataSource,
    entity: EntitySchema<Row>,
  ) {
    const metadata = dataSource.getMetadata(entity);
    const quote = (name: string) => dataSource.driver.escape(name);
    this.name = quote(metadata.tableName);
    this.columns = metadata.columns;
    this.columnList = this.columns.map((column) => quote(column.databaseName)).join(", ");
    const assignments = this.columns.filter((column) => column.propertyName !== "id");
    const setList = assignments.map((column) => `${quote(column.databaseName)} = ?`).join(", ");
    this.updateSql = `UPDATE ${this.name} SET ${setList} WHERE id = ?`;
  }

  /** The entity row of a raw result row. */
  hydrate(raw: Record<string, unknown>): Row {
    const row: Record<string, unknown> = {};
    for (const column of this.columns) {
      row[column.propertyName] = this.dataSource.driver.prepareHydratedValue(raw[column.databaseName], column);
    }
    return row as Row;
  }

  /** A page and the total count in one query (a second one only when the page lies past the end). */
  async page(
    manager: EntityManager,
    query: { where: string; parameters: unknown[]; order: string; offset: number; limit: number },
  ): Promise<{ rows: Row[]; total: number }> {
    const { where, parameters } = query;
    const raw = (await manager.query(
      `SELECT ${this.columnList}, COUNT(*) OVER () AS total_count FROM ${this.name} WHERE ${where} ORDER BY ${query.order} LIMIT ? OFFSET ?`,
      [...parameters, query.limit, query.offset],
    )) as Record<string, unknown>[];
    if (raw.length > 0) return { rows: raw.map((row) => this.hydrate(row)), total: Number(raw[0].total_count) };
    if (query.offset === 0) return { rows: [], total: 0 };
    const [count] = (await manager.query(
      `SELECT COUNT(*) AS total_count FROM ${this.name} WHERE ${where}`,
      parameters,
    )) as {
      total_count: unknown;
    }[];
    return { rows: [], total: Number(count.total_count) };
  }

  async select(manager: EntityManager, where: string, parameters: unknown[]): Promise<Row[]> {
    const { sql } = this.selectStatement(where, parameters);
    return this.hydrateAll(await manager.query(sql, parameters));
  }

  /** A SELECT of whole rows, for a batch; `hydrateAll` reads its result. */
  selectStatement(where: string, parameters: unknown[]): Statement {
    return { sql: `SELECT ${this.columnList} FROM ${this.name} WHERE ${where}`, parameters };
  }

  hydrateAll(result: unknown): Row[] {
    return (result as Record<string, unknown>[]).map((row) => this.hydrate(row));
  }

  /** A multi-row INSERT of at most INSERT_CHUNK rows, for a batch. */
  insertStatement(rows: Row[]): Statement {
    if (rows.length > INSERT_CHUNK) throw new Error(`a batched INSERT takes at most ${INSERT_CHUNK} rows`);
    return { sql: this.insertSqlFor(rows.length), parameters: rows.flatMap((row) => this.values(row, this.columns)) };
  }

  /** Inserts `rows` in multi-row statements of INSERT_CHUNK, calling `between` after each. */
  async insert(manager: EntityManager, rows: Row[], between: () => Promise<void> = async () => {}): Promise<void> {
    for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
      const { sql, parameters } = this.insertStatement(rows.slice(start, start + INSERT_CHUNK));
      await manager.query(sql, parameters);
      await between();
    }
  }

  /** Inserts one row by itself, outside any transaction: one statement, prepared on MySQL. */
  async insertAlone(row: Row): Promise<void> {
    await runStandalone(this.dataSource, this.insertSqlFor(1), this.values(row, this.columns));
  }

  async update(manager: EntityManager, row: Row): Promise<void> {
    const assignments = this.columns.filter((column) => column.propertyName !== "id");
    await manager.query(this.updateSql, [...this.values(row, assignments), row.id]);
  }

  private values(row: Row, columns: ColumnMetadata[]): unknown[] {
    const record = row as unknown as Record<string, unknown>;
    return columns.map((column) =>
      this.dataSource.driver.preparePersistentValue(record[column.propertyName] ?? null, column),
    );
  }

  private insertSqlFor(count: number): string {
    let sql = this.insertSql.get(count);
    if (!sql) {
      const tuple = `(${this.columns.map(() => "?").join(", ")})`;
      sql = `INSERT INTO ${this.name} (${this.columnList}) VALUES ${Array(count).fill(tuple).join(", ")}`;
      this.insertSql.set(count, sql);
    }
    return sql;
  }
}

/** `?, ?, ?` for `count` parameters. */
export function placeholders(count: number): string {
  return Array(count).fill("?").join(", ");
}
