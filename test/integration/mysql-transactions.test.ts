import test from "ava";
import mysql from "mysql2/promise";
import { openDatabase } from "../../src/app.js";
import { loadConfig } from "../../src/platform/config.js";
import { connectDatabase, inTransaction } from "../../src/platform/database.js";
import { CommitInDoubt, endLostConnection } from "../../src/platform/lost-connections.js";
import { createTestDatabase } from "../support/test-server.js";

/** More transactions at once than the pool has connections: every connection is used, and some twice. */
const AT_ONCE = 16;

test("every transaction on MySQL runs at READ COMMITTED, on each pooled connection, first use or not", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const dataSource = await connectDatabase(openDatabase(loadConfig({ DATABASE_URL: database.url })));
  t.teardown(() => dataSource.destroy());

  const levels = await Promise.all(
    Array.from({ length: AT_ONCE * 2 }, () =>
      inTransaction(dataSource, async (manager) => {
        const [row] = (await manager.query(
          "SELECT @@tx_isolation AS level, CONNECTION_ID() AS connection, SLEEP(0.02) AS slept",
        )) as { level: string; connection: unknown }[];
        return row;
      }),
    ),
  );
  const connections = new Set(levels.map((row) => String(row.connection)));
  t.true(connections.size > 1, "the transactions ran on several connections");
  t.deepEqual([...new Set(levels.map((row) => row.level))], ["READ-COMMITTED"]);
});

test("a plain query outside a transaction also runs at READ COMMITTED", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const dataSource = await connectDatabase(openDatabase(loadConfig({ DATABASE_URL: database.url })));
  t.teardown(() => dataSource.destroy());

  const [row] = (await dataSource.query("SELECT @@tx_isolation AS level")) as { level: string }[];
  t.is(row.level, "READ-COMMITTED");
});

test("a deadlock victim runs again; a transaction timed out waiting for a lock answers 503 at once", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const dataSource = await connectDatabase(openDatabase(loadConfig({ DATABASE_URL: database.url })));
  t.teardown(() => dataSource.destroy());
  await dataSource.query("CREATE TABLE lock_probe (id INT PRIMARY KEY)");
  await dataSource.query("INSERT INTO lock_probe VALUES (1), (2)");
  const lockRow = (manager: { query: (sql: string, parameters: unknown[]) => Promise<unknown> }, id: number) =>
    manager.query("SELECT id FROM lock_probe WHERE id = ? FOR UPDATE", [id]);

  // Two transactions locking the two rows in opposite orders, each waiting for the other to hold its first.
  let runs = 0;
  let bothHoldOne: () => void = () => {};
  const firstLocks = new Promise<void>((resolve) => {
    let held = 0;
    bothHoldOne = () => {
      if (++held === 2) resolve();
    };
  });
  const crossing = (first: number, second: number) =>
    inTransaction(dataSource, async (manager) => {
      runs++;
      await lockRow(manager, first);
      bothHoldOne();
      await firstLocks;
      await lockRow(manager, second);
      return first;
    });
  t.deepEqual(await Promise.all([crossing(1, 2), crossing(2, 1)]), [1, 2]);
  t.is(runs, 3, "the deadlock's victim ran once more, and then committed");

  const holder = dataSource.createQueryRunner();
  await holder.startTransaction();
  await lockRow(holder.manager, 1);
  let attempts = 0;
  const waiting = inTransaction(dataSource, async (manager) => {
    attempts++;
    await manager.query("SET SESSION innodb_lock_wait_timeout = 1");
    await lockRow(manager, 1);
  });
  await t.throwsAsync(waiting, { message: /busy/ });
  t.is(attempts, 1, "a lock wait that timed out is not waited again");
  await holder.commitTransaction();
  await holder.release();
});

test("a lost connection is ended on the server, unless the server started after its transaction", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const dataSource = await connectDatabase(openDatabase(loadConfig({ DATABASE_URL: database.url })));
  t.teardown(() => dataSource.destroy());
  const other = await mysql.createConnection({ uri: database.url });
  t.teardown(() => other.destroy());
  const running = async () =>
    (
      (await dataSource.query("SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?", [
        other.threadId,
      ])) as unknown[]
    ).length === 1;

  // A transaction begun before the server's start: that id is not the lost connection's any more.
  await endLostConnection(dataSource, new CommitInDoubt(other.threadId, 0));
  t.true(await running(), "a connection made since the server started is left alone");
  await endLostConnection(dataSource, new CommitInDoubt(other.threadId, Date.now()));
  t.false(await running(), "the lost connection is gone from the server");
  await t.throwsAsync(other.query("SELECT 1"));
});
