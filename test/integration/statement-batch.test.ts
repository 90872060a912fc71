import anyTest, { type TestFn } from "ava";
import { inTransaction } from "../../src/platform/database.js";
import { runBatch } from "../../src/platform/statement-batch.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

// runBatch sends a transaction's statements together on MySQL (one multi-statement query) and one by one on
// SQLite: the same results, the same all-or-nothing, and values bound as values either way.

const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
  for (const server of Object.values(t.context.servers)) {
    await server.app.dataSource.query("CREATE TABLE batch_probe (id VARCHAR(36) PRIMARY KEY, note VARCHAR(200))");
  }
});

test.after.always(async (t) => {
  await t.context.close?.();
});

const insert = (id: string, note: string) => ({
  sql: "INSERT INTO batch_probe (id, note) VALUES (?, ?)",
  parameters: [id, note],
});
const select = (prefix: string) => ({
  sql: "SELECT id, note FROM batch_probe WHERE id LIKE ? ORDER BY id",
  parameters: [`${prefix}%`],
});

for (const name of ["MySQL", "SQLite"] as const) {
  test.serial(`${name}: statements run in order, each answering its own result`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const results = await inTransaction(dataSource, (manager) =>
      runBatch(manager, [insert("order-1", "a"), insert("order-2", "b"), select("order-"), select("none-")]),
    );
    t.is(results.length, 4);
    t.deepEqual(
      (results[2] as { id: string; note: string }[]).map((row) => ({ ...row })),
      [
        { id: "order-1", note: "a" },
        { id: "order-2", note: "b" },
      ],
      "the SELECT sees the INSERTs before it",
    );
    t.deepEqual(results[3], []);
  });

  test.serial(`${name}: a statement that fails fails the batch, and its transaction stores nothing`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    await t.throwsAsync(
      inTransaction(dataSource, (manager) =>
        runBatch(manager, [insert("fail-1", "kept?"), insert("fail-1", "duplicate"), insert("fail-2", "after")]),
      ),
    );
    t.deepEqual(await dataSource.query("SELECT id FROM batch_probe WHERE id LIKE 'fail-%'"), []);
  });

  test.serial(`${name}: values are bound, so SQL inside one stays text`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const hostile = "x'); DROP TABLE batch_probe; -- ? \\'; SELECT 1; #";
    const [, rows] = await inTransaction(dataSource, (manager) =>
      runBatch(manager, [insert("bound-1", hostile), select("bound-")]),
    );
    t.is((rows as { note: string }[])[0].note, hostile);
    const [count] = (await dataSource.query("SELECT COUNT(*) AS n FROM batch_probe")) as { n: unknown }[];
    t.true(Number(count.n) >= 3, "the table is still there");
  });

  test.serial(`${name}: one statement, and none`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const [rows] = await runBatch(dataSource.manager, [select("order-1")]);
    t.is((rows as unknown[]).length, 1);
    t.deepEqual(await runBatch(dataSource.manager, []), []);
  });
}
