import type { DataSource, EntityManager, EntitySchema } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { placeholders } from "../catalog/sql-table.js";
import { changedRows, dialectOf, insertIgnore, yieldToEventLoop } from "../platform/database.js";
import type { SessionRecordRow } from "./entities.js";

/** Rows per multi-row INSERT: well under every driver's limit of bound parameters. */
const INSERT_CHUNK = 100;

/** A row to insert: the id is the database's. */
export type NewSessionRecord = Omit<SessionRecordRow, "id">;

/** A row as lists show it. */
export type ListedSessionRecord = Omit<SessionRecordRow, "providerId" | "entitlementId">;

export interface SessionRecordQuery {
  sessionId: string;
  /** Only this event name (level or metric name); every one when empty. */
  eventName: string;
  /** Inclusive; unbounded when null. */
  from: Date | null;
  /** Exclusive; unbounded when null. */
  to: Date | null;
  offset: number;
  limit: number;
}

const INSERTED = [
  "provider_id",
  "entitlement_id",
  "session_id",
  "transaction_id",
  "event_name",
  "event_data",
  "occurred_at",
  "recorded_at",
];

/**
 * The SQL of one table of session records (`session_logs` or `session_metrics`). Items whose (session,
 * transactionId) is stored already are skipped by the database itself (INSERT IGNORE on MySQL, INSERT OR IGNORE
 * on SQLite), so a retried batch is stored once even when its retries race on several instances.
 */
export class SessionRecordStore {
  private readonly table: string;
  private readonly dateColumn: ColumnMetadata;
  private readonly selectList: string;
  private readonly insertPrefix: string;

  constructor(
    private readonly dataSource: DataSource,
    entity: EntitySchema<SessionRecordRow>,
  ) {
    const metadata = dataSource.getMetadata(entity);
    const dialect = dialectOf(dataSource);
    this.table = metadata.tableName;
    this.dateColumn = metadata.columns.find((column) => column.propertyName === "occurredAt") as ColumnMetadata;
    // Exact digits: better-sqlite3 answers integers as JS numbers, which lose those past 2^53.
    const asText = (column: string) => (dialect === "mysql" ? column : `CAST(${column} AS TEXT)`);
    this.selectList = [
      `${asText("id")} AS id`,
      "session_id",
      `${asText("transaction_id")} AS transaction_id`,
      "event_name",
      "event_data",
      "occurred_at",
      "recorded_at",
    ].join(", ");
    this.insertPrefix = `${insertIgnore(dialect)} INTO ${this.table} (${INSERTED.join(", ")}) VALUES `;
  }

  /** Inserts `rows` in multi-row statements (skipping stored transactionIds); answers how many were stored. */
  async insertNew(manager: EntityManager, rows: NewSessionRecord[]): Promise<number> {
    let stored = 0;
    const tuple = `(${placeholders(INSERTED.length)})`;
    for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
      const chunk = rows.slice(start, start + INSERT_CHUNK);
      const sql = this.insertPrefix + Array(chunk.length).fill(tuple).join(", ");
      stored += await changedRows(
        manager,
        sql,
        chunk.flatMap((row) => this.values(row)),
      );
      await yieldToEventLoop(this.dataSource);
    }
    return stored;
  }

  /** A page of a session's records, newest first, and how many the query selects in all. */
  async page(
    manager: EntityManager,
    query: SessionRecordQuery,
  ): Promise<{ rows: ListedSessionRecord[]; total: number }> {
    const clauses = ["session_id = ?"];
    const parameters: unknown[] = [query.sessionId];
    if (query.eventName) {
      clauses.push("event_name = ?");
      parameters.push(query.eventName);
    }
    if (query.from) {
      clauses.push("occurred_at >= ?");
      parameters.push(this.date(query.from));
    }
    if (query.to) {
      clauses.push("occurred_at < ?");
      parameters.push(this.date(query.to));
    }
    const where = clauses.join(" AND ");
    const raw = (await manager.query(
      `SELECT ${this.selectList}, COUNT(*) OVER () AS total_count FROM ${this.table} WHERE ${where} ` +
        "ORDER BY occurred_at DESC, id DESC LIMIT ? OFFSET ?",
      [...parameters, query.limit, query.offset],
    )) as Record<string, unknown>[];
    if (raw.length > 0) return { rows: raw.map((row) => this.hydrate(row)), total: Number(raw[0].total_count) };
    if (query.offset === 0) return { rows: [], total: 0 };
    const [count] = (await manager.query(`SELECT COUNT(*) AS n FROM ${this.table} WHERE ${where}`, parameters)) as {
      n: unknown;
    }[];
    return { rows: [], total: Number(count.n) };
  }

  private values(row: NewSessionRecord): unknown[] {
    return [
      row.providerId,
      row.entitlementId,
      row.sessionId,
      row.transactionId,
      row.eventName,
      row.eventData,
      this.date(row.occurredAt),
      this.date(row.recordedAt),
    ];
  }

  private hydrate(raw: Record<string, unknown>): ListedSessionRecord {
    return {
      id: String(raw.id),
      sessionId: String(raw.session_id),
      transactionId: raw.transaction_id === null ? null : String(raw.transaction_id),
      eventName: String(raw.event_name),
      eventData: String(raw.event_data ?? ""),
      occurredAt: this.dataSource.driver.prepareHydratedValue(raw.occurred_at, this.dateColumn) as Date,
      recordedAt: this.dataSource.driver.prepareHydratedValue(raw.recorded_at, this.dateColumn) as Date,
    };
  }

  /** A date as the driver stores it, for comparisons in SQL. */
  private date(value: Date): unknown {
    return this.dataSource.driver.preparePersistentValue(value, this.dateColumn);
  }
}
