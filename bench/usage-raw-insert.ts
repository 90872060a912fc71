/**
 * The floor under usage ingest: the rows a batch of usage transactions stores, inserted straight into the
 * service's own `usage_records` (after its run) for a number of seconds, `batch` rows per multi-row INSERT, each
 * INSERT its own transaction (autocommit), with the service's driver: mysql2 with one connection per loop and
 * `concurrency` loops, or better-sqlite3 with the service's pragmas, one INSERT after another (SQLite has one
 * writer). Each row copies a row the service stored (same provider, entitlement, asset and period), with a session
 * of the loop's own, increasing transaction ids, the amount and the current time, as UsageStore.insertRecords
 * binds them. First counts the usage transactions the service stored, for the ingest row's check.
 * Prints its figures (one step = one batch) as JSON, plus `storedByService`.
 * Usage: node --import tsx bench/usage-raw-insert.ts '<json options>'
 */
import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import { loopFigures, loopFor } from "./timed-loop.js";

interface Options {
  databaseUrl: string;
  batch: number;
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
}

type Row = Record<string, unknown>;

const COLUMNS = [
  "provider_id",
  "entitlement_id",
  "asset_id",
  "session_id",
  "transaction_id",
  "kind",
  "amount",
  "period_start",
  "occurred_at",
  "recorded_at",
];
const TRANSACTION = 1;
const options = JSON.parse(process.argv[2] ?? "{}") as Options;
const insertSql = (quote: string) =>
  `INSERT INTO usage_records (${COLUMNS.map((column) => `${quote}${column}${quote}`).join(", ")}) VALUES ${Array(
    options.batch,
  )
    .fill(`(${COLUMNS.map(() => "?").join(", ")})`)
    .join(", ")}`;

/** A loop's rows: its own session, the next transaction ids, recorded now. */
function batchMaker(template: Row, loops: number, now: () => unknown) {
  const sessions = Array.from({ length: loops }, () => ({ sessionId: randomUUID(), nextId: 1 }));
  return (loop: number): unknown[] => {
    const session = sessions[loop];
    const at = now();
    const values: unknown[] = [];
    const fresh: Row = { session_id: session.sessionId, occurred_at: at, recorded_at: at };
    for (let index = 0; index < options.batch; index++) {
      fresh.transaction_id = session.nextId++;
      for (const column of COLUMNS) values.push(column in fresh ? fresh[column] : template[column]);
    }
    return values;
  };
}

async function openMysql() {
  const pool = mysql.createPool({
    uri: options.databaseUrl,
    connectionLimit: options.concurrency,
    timezone: "Z",
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
  const [counted] = await pool.query("SELECT COUNT(*) AS n FROM usage_records WHERE kind = ?", [TRANSACTION]);
  const [rows] = await pool.query("SELECT * FROM usage_records WHERE kind = ? LIMIT 1", [TRANSACTION]);
  const sql = insertSql("`");
  const rowsOf = batchMaker((rows as Row[])[0], options.concurrency, () => new Date());
  return {
    storedByService: Number((counted as Row[])[0].n),
    concurrency: options.concurrency,
    insert: async (loop: number) => {
      await pool.query(sql, rowsOf(loop));
    },
    close: () => pool.end(),
  };
}

async function openSqlite() {
  const db = new Database(options.databaseUrl.replace(/^sqlite:/, ""));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  const { n } = db.prepare("SELECT COUNT(*) AS n FROM usage_records WHERE kind = ?").get(TRANSACTION) as Row;
  const template = db.prepare("SELECT * FROM usage_records WHERE kind = ? LIMIT 1").get(TRANSACTION) as Row;
  const statement = db.prepare(insertSql('"'));
  const rowsOf = batchMaker(template, 1, () => new Date().toISOString().replace("T", " ").replace("Z", ""));
  return {
    storedByService: Number(n),
    concurrency: 1,
    insert: async (loop: number) => {
      statement.run(rowsOf(loop));
    },
    close: async () => db.close(),
  };
}

const database = options.databaseUrl.startsWith("mysql:") ? await openMysql() : await openSqlite();
if (database.storedByService === 0) throw new Error("the service stored no usage transaction to copy");
await loopFor(options.warmupSeconds, database.concurrency, database.insert);
const measured = await loopFor(options.seconds, database.concurrency, database.insert);
await database.close();
process.stdout.write(`${JSON.stringify({ ...loopFigures(measured), storedByService: database.storedByService })}\n`);
