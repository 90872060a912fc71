import test from "ava";
import { openDatabase } from "../../src/app.js";
import { loadConfig } from "../../src/platform/config.js";
import { connectDatabase, inTransaction } from "../../src/platform/database.js";
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
