import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";

type Row = Record<string, unknown>;

/** The broadcast event the copies are made of: its row as stored. */
export interface EventTemplate {
  id: string;
  payload: string;
}

/**
 * The benchmark's hand in the service's outbox: copies of an event the service wrote (each with a new id, in its
 * row and its envelope, and not yet matched to subscriptions) committed at once, as a burst of changes would
 * leave them, and what is still to be sent.
 */
export interface OutboxCopies {
  /** The newest broadcast event of `type` the service stored. */
  template(type: string): Promise<EventTemplate>;
  /** Inserts `count` copies of the template in one transaction. */
  copy(template: EventTemplate, count: number): Promise<void>;
  /** Events not yet matched to subscriptions plus deliveries still pending: 0 once everything is sent and recorded. */
  unsettled(): Promise<number>;
  close(): Promise<void>;
}

const TEMPLATE_WHERE = "type = ? AND target_subscription_id IS NULL ORDER BY created_at DESC LIMIT 1";
const UNSETTLED =
  "SELECT (SELECT COUNT(*) FROM webhook_events WHERE fanned_out_at IS NULL) + " +
  "(SELECT COUNT(*) FROM webhook_deliveries WHERE status = 1) AS n";
const ROWS_PER_INSERT = 500;

/** The outbox of the database at `databaseUrl` (`sqlite:` file or `mysql:` URL), with the service's drivers. */
export function openOutboxCopies(databaseUrl: string): OutboxCopies {
  return databaseUrl.startsWith("mysql:") ? mysqlOutbox(databaseUrl) : sqliteOutbox(databaseUrl);
}

function copiesOf(templateRow: Row, count: number): Row[] {
  const payload = String(templateRow.payload);
  return Array.from({ length: count }, () => {
    const id = randomUUID();
    return { ...templateRow, id, payload: payload.replace(String(templateRow.id), id), fanned_out_at: null };
  });
}

function mysqlOutbox(databaseUrl: string): OutboxCopies {
  const pool = mysql.createPool({ uri: databaseUrl, connectionLimit: 2, timezone: "Z" });
  const rowOf = async (id: string) => {
    const [rows] = await pool.query("SELECT * FROM webhook_events WHERE id = ?", [id]);
    return (rows as Row[])[0];
  };
  return {
    async template(type) {
      const [rows] = await pool.query(`SELECT id, payload FROM webhook_events WHERE ${TEMPLATE_WHERE}`, [type]);
      const [found] = rows as EventTemplate[];
      if (!found) throw new Error(`no ${type} event in the outbox to copy`);
      return found;
    },
    async copy(template, count) {
      const rows = copiesOf(await rowOf(template.id), count);
      const columns = Object.keys(rows[0]);
      const connection = await pool.getConnection();
      try {
        await connection.beginTransaction();
        for (let from = 0; from < rows.length; from += ROWS_PER_INSERT) {
          const values = rows.slice(from, from + ROWS_PER_INSERT).map((row) => columns.map((column) => row[column]));
          await connection.query(
            `INSERT INTO webhook_events (${columns.map((column) => `\`${column}\``).join(", ")}) VALUES ?`,
            [values],
          );
        }
        await connection.commit();
      } finally {
        connection.release();
      }
    },
    async unsettled() {
      const [rows] = await pool.query(UNSETTLED);
      return Number((rows as Row[])[0].n);
    },
    close: () => pool.end(),
  };
}

function sqliteOutbox(databaseUrl: string): OutboxCopies {
  const db = new Database(databaseUrl.replace(/^sqlite:/, ""));
  db.pragma("busy_timeout = 10000");
  return {
    async template(type) {
      const found = db.prepare(`SELECT id, payload FROM webhook_events WHERE ${TEMPLATE_WHERE}`).get(type);
      if (!found) throw new Error(`no ${type} event in the outbox to copy`);
      return found as EventTemplate;
    },
    async copy(template, count) {
      const rows = copiesOf(db.prepare("SELECT * FROM webhook_events WHERE id = ?").get(template.id) as Row, count);
      const columns = Object.keys(rows[0]);
      const insert = db.prepare(
        `INSERT INTO webhook_events (${columns.map((column) => `"${column}"`).join(", ")}) VALUES (${columns.map((column) => `@${column}`).join(", ")})`,
      );
      db.transaction(() => {
        for (const row of rows) insert.run(row);
      })();
    },
    async unsettled() {
      return Number((db.prepare(UNSETTLED).get() as Row).n);
    },
    close: async () => {
      db.close();
    },
  };
}
