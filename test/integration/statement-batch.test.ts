import anyTest, { type TestFn } from "ava";
import { inTransaction } from "../../src/platform/database.js";
import { inBatchedTransaction, runBatch } from "../../src/platform/statement-batch.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

// runBatch sends a transaction's statements together on MySQL (one multi-statement query) and one by one on
// SQLite: the same results, the same all-or-nothing, and values bound as values either way.

const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
  for (const server of Object.values(t.context.servers)) {
    await server.app.dataSource.query("CREATE TABLE batch_probe (id VARCHAR(36) PRIMARY KEY, note VARCHAR(200))");
    await server.app.dataSource.query("CREATE TABLE batch_counter (id VARCHAR(36) PRIMARY KEY, n INT NOT NULL)");
    const text = server === t.context.servers.MySQL ? "MEDIUMTEXT" : "TEXT";
    await server.app.dataSource.query(`CREATE TABLE batch_blob (id VARCHAR(36) PRIMARY KEY, body ${text})`);
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

  test.serial(`${name}: a batch larger than the server takes in one query goes in parts, in order`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    // 24 statements of 1 MiB each: more than MariaDB's default max_allowed_packet (16 MiB) in all.
    const body = (index: number) => String.fromCharCode(97 + index).repeat(1024 * 1024);
    const statements = Array.from({ length: 24 }, (_, index) => ({
      sql: "INSERT INTO batch_blob (id, body) VALUES (?, ?)",
      parameters: [`blob-${String(index).padStart(2, "0")}`, body(index)],
    }));
    const results = await inTransaction(dataSource, (manager) =>
      runBatch(manager, [
        ...statements,
        { sql: "SELECT id, LENGTH(body) AS size FROM batch_blob ORDER BY id", parameters: [] },
      ]),
    );
    t.is(results.length, 25);
    const rows = results[24] as { id: string; size: unknown }[];
    t.deepEqual(
      rows.map((row) => [row.id, Number(row.size)]),
      statements.map((statement) => [statement.parameters[0], 1024 * 1024]),
    );
  });

  test.serial(`${name}: one statement, and none`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const [rows] = await runBatch(dataSource.manager, [select("order-1")]);
    t.is((rows as unknown[]).length, 1);
    t.deepEqual(await runBatch(dataSource.manager, []), []);
  });
}

const counter = (id: string) => ({ sql: "SELECT n FROM batch_counter WHERE id = ?", parameters: [id] });
const notes = async (dataSource: { query(sql: string, parameters: unknown[]): Promise<unknown> }, prefix: string) =>
  (
    (await dataSource.query("SELECT id FROM batch_probe WHERE id LIKE ? ORDER BY id", [`${prefix}%`])) as {
      id: string;
    }[]
  ).map((row) => row.id);

for (const name of ["MySQL", "SQLite"] as const) {
  test.serial(`${name}: a batched transaction commits its batches together, with its last`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const answered = await inBatchedTransaction(dataSource, async (transaction) => {
      const [, seen] = await transaction.run([insert("tx-1", "first"), select("tx-")]);
      t.is((seen as unknown[]).length, 1, "a batch sees the transaction's own writes");
      const [, after] = await transaction.commitWith([insert("tx-2", "last"), select("tx-")]);
      return (after as unknown[]).length;
    });
    t.is(answered, 2);
    t.deepEqual(await notes(dataSource, "tx-"), ["tx-1", "tx-2"]);
  });

  test.serial(`${name}: a batched transaction without commitWith commits when its work ends`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    await inBatchedTransaction(dataSource, (transaction) => transaction.run([insert("open-1", "kept")]));
    t.deepEqual(await notes(dataSource, "open-"), ["open-1"]);
  });

  test.serial(
    `${name}: a batched transaction stores nothing when its work throws or its last batch fails`,
    async (t) => {
      const { dataSource } = t.context.servers[name].app;
      // More failures than the pool has connections: each one gives its connection back.
      for (let round = 0; round < 12; round++) {
        await t.throwsAsync(
          inBatchedTransaction(dataSource, async (transaction) => {
            await transaction.run([insert(`undone-${round}`, "rolled back")]);
            throw new Error("the rules refused");
          }),
          { message: "the rules refused" },
        );
      }
      await t.throwsAsync(
        inBatchedTransaction(dataSource, async (transaction) => {
          await transaction.run([insert("undone-a", "rolled back")]);
          await transaction.commitWith([insert("undone-b", "rolled back"), insert("undone-a", "duplicate")]);
        }),
      );
      t.deepEqual(await notes(dataSource, "undone-"), []);
      await inBatchedTransaction(dataSource, (transaction) => transaction.commitWith([insert("after-1", "works")]));
      t.deepEqual(await notes(dataSource, "after-"), ["after-1"]);
    },
  );

  test.serial(`${name}: a lock taken in the first batch is held until the commit`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const id = `counter-${name}`;
    await dataSource.query("INSERT INTO batch_counter (id, n) VALUES (?, 0)", [id]);
    const lock = name === "MySQL" ? " FOR UPDATE" : "";
    const increment = () =>
      inBatchedTransaction(dataSource, async (transaction) => {
        const [rows] = await transaction.run([{ ...counter(id), sql: `${counter(id).sql}${lock}` }]);
        const n = Number((rows as { n: unknown }[])[0].n);
        await new Promise((resolve) => setTimeout(resolve, 20));
        await transaction.commitWith([{ sql: "UPDATE batch_counter SET n = ? WHERE id = ?", parameters: [n + 1, id] }]);
      });
    await Promise.all(Array.from({ length: 8 }, increment));
    const [row] = (await dataSource.query(counter(id).sql, counter(id).parameters)) as { n: unknown }[];
    t.is(Number(row.n), 8, "no increment was lost: each read waited for the commit before it");
  });
}

test.serial(
  "MySQL: a transaction's own lock wait holds for its statements and is set back whatever its end",
  async (t) => {
    const { dataSource } = t.context.servers.MySQL.app;
    await dataSource.query("INSERT INTO batch_probe (id, note) VALUES ('held', 'x')");
    const lockWaitOf = (manager: { query: (sql: string) => Promise<unknown> }) =>
      manager.query("SELECT @@session.innodb_lock_wait_timeout AS seconds") as Promise<{ seconds: unknown }[]>;
    const [inside] = await inBatchedTransaction(
      dataSource,
      async (transaction) => lockWaitOf(await transaction.open()),
      {
        lockWaitSeconds: 1,
      },
    );
    t.is(Number(inside.seconds), 1);

    const holder = dataSource.createQueryRunner();
    await holder.startTransaction();
    await holder.query("SELECT id FROM batch_probe WHERE id = 'held' FOR UPDATE");
    const started = Date.now();
    const waiting = inBatchedTransaction(
      dataSource,
      (transaction) =>
        transaction.run([{ sql: "SELECT id FROM batch_probe WHERE id = 'held' FOR UPDATE", parameters: [] }]),
      { lockWaitSeconds: 1 },
    );
    await t.throwsAsync(waiting, { message: /busy/ });
    t.true(Date.now() - started < 20_000, "it gave up after its own wait, not the server's");
    await holder.commitTransaction();
    await holder.release();

    const [global] = (await dataSource.query("SELECT @@global.innodb_lock_wait_timeout AS seconds")) as {
      seconds: unknown;
    }[];
    const sessions = await Promise.all(
      Array.from({ length: 30 }, () =>
        dataSource.query("SELECT @@session.innodb_lock_wait_timeout AS seconds, SLEEP(0.05) AS slept"),
      ),
    );
    t.deepEqual([...new Set(sessions.map(([row]) => Number(row.seconds)))], [Number(global.seconds)]);
  },
);
