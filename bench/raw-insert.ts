/**
 * The floor under REST create: the same product rows inserted straight into the database for a number of
 * seconds, with the service's driver (mysql2 with a pool of 10 and `concurrency` inserts in flight, or
 * better-sqlite3 in WAL mode, one insert after another). Each row copies the row the service stored for a
 * created product, with a new id and product code. Prints its figures as JSON.
 * Usage: node --import tsx bench/raw-insert.ts '<json options>'
 */
import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import { loopFigures, loopFor } from "./timed-loop.js";

interface Options {
  databaseUrl: string;
  /** The id of a product the service created: its row is the template. */
  templateId: string;
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
}

type Row = Record<string, unknown>;
type Insert = (row: Row) => Promise<void>;

const options = JSON.parse(process.argv[2] ?? "{}") as Options;
let sequence = 0;

function freshRow(template: Row): Row {
  sequence++;
  return { ...template, id: randomUUID(), product_code: `RAW-${process.pid}-${sequence}` };
}

async function openMysql(): Promise<{ template: Row; insert: Insert; close(): Promise<void> }> {
  const pool = mysql.createPool({ uri: options.databaseUrl, connectionLimit: 10, timezone: "Z" });
  const [rows] = await pool.query("SELECT * FROM products WHERE id = ?", [options.templateId]);
  const template = (rows as Row[])[0];
  const columns = Object.keys(template);
  const sql = `INSERT INTO products (${columns.map((column) => `\`${column}\``).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`;
  return {
    template,
    insert: async (row) => {
      await pool.execute(
        sql,
        columns.map((column) => row[column] as never),
      );
    },
    close: () => pool.end(),
  };
}

async function openSqlite(): Promise<{ template: Row; insert: Insert; close(): Promise<void> }> {
  const db = new Database(options.databaseUrl.replace(/^sqlite:/, ""));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  const template = db.prepare("SELECT * FROM products WHERE id = ?").get(options.templateId) as Row;
  const columns = Object.keys(template);
  const statement = db.prepare(
    `INSERT INTO products (${columns.map((column) => `"${column}"`).join(", ")}) VALUES (${columns.map((column) => `@${column}`).join(", ")})`,
  );
  return {
    template,
    insert: async (row) => {
      statement.run(row);
    },
    close: async () => {
      db.close();
    },
  };
}

const database = options.databaseUrl.startsWith("mysql:") ? await openMysql() : await openSqlite();
if (!database.template) throw new Error(`no product ${options.templateId} to copy`);
const concurrency = options.databaseUrl.startsWith("mysql:") ? options.concurrency : 1;
const step = () => database.insert(freshRow(database.template));
await loopFor(options.warmupSeconds, concurrency, step);
const measured = await loopFor(options.seconds, concurrency, step);
await database.close();
process.stdout.write(`${JSON.stringify(loopFigures(measured))}\n`);
