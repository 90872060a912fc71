import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import mysql from "mysql2/promise";
import { createTestDatabase } from "../support/test-server.js";

const run = promisify(execFile);

async function migrateCommand(databaseUrl: string, args: string[] = []) {
  return run("node_modules/.bin/tsx", ["src/cli/migrate.ts", ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
}

test("npm run migrate applies pending migrations once and reports them as JSON", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const first = await migrateCommand(database.url);
  const applied = JSON.parse(first.stdout).applied as string[];
  t.true(applied.length > 0);
  const second = await migrateCommand(database.url);
  t.deepEqual(JSON.parse(second.stdout), { applied: [] });

  const connection = await mysql.createConnection({ uri: database.url });
  t.teardown(() => connection.end());
  const [tables] = await connection.query("SHOW TABLES");
  const names = (tables as Record<string, string>[]).map((row) => Object.values(row)[0]);
  t.true(["products", "features", "monitored_assets", "schema_migrations"].every((name) => names.includes(name)));
});

test("npm run migrate names the variable when DATABASE_URL is bad", async (t) => {
  const error = await t.throwsAsync<Error & { code: number; stderr: string }>(migrateCommand("postgres://nope/db"));
  t.is(error?.code, 2);
  t.regex(error?.stderr ?? "", /DATABASE_URL/);
});

test("npm run migrate refuses arguments it does not take, before touching the database", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const error = await t.throwsAsync<Error & { code: number; stderr: string }>(
    migrateCommand(database.url, ["--bogus"]),
  );
  t.is(error?.code, 2);
  t.regex(error?.stderr ?? "", /--bogus/);
  const connection = await mysql.createConnection({ uri: database.url });
  t.teardown(() => connection.end());
  const [tables] = await connection.query("SHOW TABLES");
  t.deepEqual(tables, [], "nothing applied");
});
