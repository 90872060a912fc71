import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test, { type ExecutionContext } from "ava";
import type { DataSource } from "typeorm";
import { createDataSource, isUniqueViolation, migrate } from "../../src/platform/database.js";
import { UsageTransactionIndex1765036800000 } from "../../src/platform/migrations/0016-usage-transaction-index.js";
import { migrations } from "../../src/platform/migrations/index.js";

// Migration 0016 rebuilds the embedded database's usage_records so that its unique index of transaction ids
// holds only the records that have one; a database made before it keeps every row and its id sequence.
const BEFORE_0016 = migrations.slice(0, migrations.indexOf(UsageTransactionIndex1765036800000));
const SESSION = "5e55104e-0000-4000-8000-00000000000a";
const OTHER_SESSION = "5e55104e-0000-4000-8000-00000000000b";

async function open(t: ExecutionContext, file: string, upTo: typeof migrations): Promise<DataSource> {
  const dataSource = await createDataSource({ kind: "sqlite", file }, [], upTo).initialize();
  t.teardown(() => (dataSource.isInitialized ? dataSource.destroy() : undefined));
  await migrate(dataSource);
  return dataSource;
}

function insertRecord(dataSource: DataSource, sessionId: string, transactionId: number | null) {
  return dataSource.query(
    "INSERT INTO usage_records (provider_id, entitlement_id, asset_id, session_id, transaction_id, kind, amount, " +
      "period_start, occurred_at, recorded_at) VALUES ('p', 'e', 'a', ?, ?, ?, 1000000, '2026-11-01 00:00:00.000', " +
      "'2026-11-27 10:00:00.000', '2026-11-27 10:00:00.000')",
    [sessionId, transactionId, transactionId === null ? 2 : 1],
  );
}

const allRecords = (dataSource: DataSource) => dataSource.query("SELECT * FROM usage_records ORDER BY id");

async function indexSql(dataSource: DataSource): Promise<Record<string, string | null>> {
  const rows = (await dataSource.query(
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'usage_records' ORDER BY name",
  )) as { name: string; sql: string | null }[];
  return Object.fromEntries(rows.map((row) => [row.name, row.sql]));
}

test("SQLite: usage records keep their rows and ids, and only transaction ids are held unique", async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-migration-0016-"));
  t.teardown(() => fs.rmSync(folder, { recursive: true, force: true }));
  const file = path.join(folder, "provision.sqlite");

  const before = await open(t, file, BEFORE_0016);
  for (const [session, transactionId] of [
    [SESSION, 1],
    [SESSION, 2],
    [SESSION, null],
    [OTHER_SESSION, null],
    [SESSION, null],
    [OTHER_SESSION, 7],
  ] as const) {
    await insertRecord(before, session, transactionId);
  }
  await before.query("DELETE FROM usage_records WHERE id = 6");
  const rows = await allRecords(before);
  t.is(rows.length, 5);
  await before.destroy();

  const after = await open(t, file, migrations);
  t.deepEqual(await allRecords(after), rows, "every row as it was");
  await insertRecord(after, OTHER_SESSION, null);
  t.deepEqual((await after.query("SELECT MAX(id) AS id FROM usage_records")) as unknown[], [{ id: 7 }], "no id reused");

  const indexes = await indexSql(after);
  t.deepEqual(Object.keys(indexes), [
    "ix_usage_records_asset_period",
    "ix_usage_records_entitlement",
    "uq_usage_records_session_transaction",
  ]);
  t.regex(indexes.uq_usage_records_session_transaction ?? "", /UNIQUE INDEX .* WHERE "transaction_id" IS NOT NULL$/);
  const duplicate = await t.throwsAsync(insertRecord(after, SESSION, 2));
  t.true(isUniqueViolation(duplicate), "a transaction id is still recorded once per session");
  await insertRecord(after, SESSION, null);

  const plan = (await after.query(
    "EXPLAIN QUERY PLAN SELECT transaction_id FROM usage_records WHERE session_id = ? AND transaction_id IN (?, ?)",
    [SESSION, 1, 2],
  )) as { detail: string }[];
  t.true(
    plan.some((step) => step.detail.includes("uq_usage_records_session_transaction")),
    JSON.stringify(plan),
  );

  // Undone down to before 0016, the later migrations with it.
  for (let undone = BEFORE_0016.length; undone < migrations.length; undone++) {
    await after.undoLastMigration({ transaction: "each" });
  }
  t.deepEqual(Object.keys(await indexSql(after)), [
    "ix_usage_records_asset_period",
    "ix_usage_records_entitlement",
    "sqlite_autoindex_usage_records_1",
  ]);
  t.is(((await allRecords(after)) as unknown[]).length, 7, "undone, every row kept");
});
