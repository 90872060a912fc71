import anyTest, { type TestFn } from "ava";
import type { DataSource } from "typeorm";
import { createDataSource, migrate } from "../../src/platform/database.js";
import { MemoryInvalidationBus } from "../../src/platform/invalidation-bus.js";
import { LoggedInvalidationBus, publishOrLog, ROWS_PER_PAGE } from "../../src/platform/invalidation-log.js";
import { migrations } from "../../src/platform/migrations/index.js";
import { collectingLogger } from "../support/collected-logs.js";
import { pollUntil } from "../support/poll.js";
import { createTestDatabase } from "../support/test-server.js";

// How an instance reads MySQL's invalidation log: every row once, however many were written in the same
// millisecond; a log it cannot read is warned of once, not every second.

interface Context {
  dataSource: DataSource;
  drop(): Promise<void>;
}
const test = anyTest as TestFn<Context>;
const CHANNEL = "test-channel";

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.dataSource = await createDataSource({ kind: "mysql", url: database.url }, [], migrations).initialize();
  await migrate(t.context.dataSource);
});

test.after.always(async (t) => {
  await t.context.dataSource?.destroy();
  await t.context.drop?.();
});

async function readingBus(dataSource: DataSource) {
  const { logger, lines: logs } = collectingLogger();
  const bus = new LoggedInvalidationBus(new MemoryInvalidationBus(), dataSource, logger);
  const received: string[] = [];
  await bus.subscribe(
    CHANNEL,
    (message) => received.push(message),
    () => {},
  );
  await bus.start();
  return { bus, received, logs };
}

test.serial("more rows than a page, all written in one statement, are each delivered once", async (t) => {
  const { dataSource } = t.context;
  const { bus, received } = await readingBus(dataSource);
  t.teardown(() => bus.close());
  const count = 2 * ROWS_PER_PAGE + 500;
  const values = Array.from({ length: count }, (_, index) => `('${CHANNEL}', 'm${index}', UTC_TIMESTAMP(3))`);
  await dataSource.query(`INSERT INTO cache_invalidations (channel, message, created_at) VALUES ${values.join(", ")}`);
  const [{ distinctTimes }] = await dataSource.query(
    "SELECT COUNT(DISTINCT created_at) AS distinctTimes FROM cache_invalidations",
  );
  t.is(Number(distinctTimes), 1, "every row has the same created_at");

  await pollUntil("every row to be delivered", async () => (received.length >= count ? true : undefined), {
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  // The rows stay in the overlap window for a few more polls: none is delivered again.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  t.is(received.length, count);
  t.is(new Set(received).size, count);
  await dataSource.query("DELETE FROM cache_invalidations");
});

test.serial("a message that the bus beneath cannot take goes through the log", async (t) => {
  const { dataSource } = t.context;
  const { bus, received } = await readingBus(dataSource);
  t.teardown(() => bus.close());
  await publishOrLog(undefined, dataSource, CHANNEL, "client-1");
  await publishOrLog(undefined, dataSource, "another-channel", "client-2");
  await pollUntil("the message to be delivered", async () => (received.length > 0 ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 100,
  });
  t.deepEqual(received, ["client-1"]);
  await dataSource.query("DELETE FROM cache_invalidations");
});

test.serial("a log that cannot be read is warned of once, and reading resumes when it can be", async (t) => {
  const { dataSource } = t.context;
  const { bus, received, logs } = await readingBus(dataSource);
  t.teardown(() => bus.close());
  await dataSource.query("RENAME TABLE cache_invalidations TO cache_invalidations_away");
  try {
    await new Promise((resolve) => setTimeout(resolve, 3500));
  } finally {
    await dataSource.query("RENAME TABLE cache_invalidations_away TO cache_invalidations");
  }
  const warnings = logs.filter((line) => line.includes("could not read the invalidation log"));
  t.is(warnings.length, 1, logs.join("\n"));

  await publishOrLog(undefined, dataSource, CHANNEL, "after");
  await pollUntil("the later message to be delivered", async () => (received.length > 0 ? true : undefined), {
    timeoutMs: 5000,
    intervalMs: 100,
  });
  t.deepEqual(received, ["after"]);
  t.true(logs.some((line) => line.includes("reading the invalidation log again")));
  await dataSource.query("DELETE FROM cache_invalidations");
});

test.serial("close waits for the read under way", async (t) => {
  const { dataSource } = t.context;
  const { bus } = await readingBus(dataSource);
  // Lock the log's table so that the next read waits on it, then close while it does.
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  await runner.query("LOCK TABLES cache_invalidations WRITE");
  await new Promise((resolve) => setTimeout(resolve, 1200));
  let closed = false;
  const closing = bus.close().then(() => {
    closed = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.false(closed, "close waits for the read that is waiting on the table");
  await runner.query("UNLOCK TABLES");
  await runner.release();
  await closing;
  t.true(closed);
});
