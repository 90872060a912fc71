import net from "node:net";
import test from "ava";
import { createApp } from "../../src/app.js";
import { loadConfig } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { pollUntil } from "../support/poll.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { createTestDatabase, TEST_REDIS_URL } from "../support/test-server.js";

// The database, the coordinator and the invalidation bus connect at once; when one of them fails, start-up
// must not leave the others' connections open.

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const noOpenConnection = (proxy: { openConnections(): number }) => () =>
  proxy.openConnections() === 0 ? true : undefined;

test("a start-up that cannot reach the database fails naming DATABASE_URL and leaves no Redis connection open", async (t) => {
  const redis = new URL(TEST_REDIS_URL);
  const proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  t.teardown(() => proxy.close());
  const config = loadConfig({
    DATABASE_URL: `mysql://root@127.0.0.1:${await closedPort()}/provision`,
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
  });

  await t.throwsAsync(createApp(config, createLogger("silent")), { message: /^DATABASE_URL is unreachable/ });
  await pollUntil("the Redis connections to close", noOpenConnection(proxy));
  t.is(proxy.openConnections(), 0);
});

test("a start-up that cannot reach Redis fails naming REDIS_URL and leaves no database connection open", async (t) => {
  t.timeout(30_000);
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const url = new URL(database.url);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
  t.teardown(() => proxy.close());
  url.host = `127.0.0.1:${proxy.port}`;
  const config = loadConfig({ DATABASE_URL: url.toString(), REDIS_URL: `redis://127.0.0.1:${await closedPort()}` });

  await t.throwsAsync(createApp(config, createLogger("silent")), { message: /^REDIS_URL is unreachable/ });
  await pollUntil("the database connections to close", noOpenConnection(proxy));
  t.is(proxy.openConnections(), 0);
});

test("a database that resets the first connections at start-up is tried again, and the start succeeds", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const url = new URL(database.url);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 3306) }, { resetFirst: 2 });
  t.teardown(() => proxy.close());
  url.host = `127.0.0.1:${proxy.port}`;
  const app = await createApp(
    loadConfig({ DATABASE_URL: url.toString(), REDIS_URL: TEST_REDIS_URL }),
    createLogger("silent"),
  );
  t.teardown(() => app.close());
  t.is(app.bootstrap.kind, "first-client");
});

test("a start-up whose Redis accepts the connection and never answers fails naming REDIS_URL", async (t) => {
  t.timeout(30_000);
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const redis = new URL(TEST_REDIS_URL);
  const silent = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  t.teardown(() => silent.close());
  silent.stall();
  const config = loadConfig({ DATABASE_URL: database.url, REDIS_URL: `redis://127.0.0.1:${silent.port}` });

  await t.throwsAsync(createApp(config, createLogger("silent")), { message: /^REDIS_URL is unreachable/ });
  await pollUntil("the silent Redis connections to close", noOpenConnection(silent));
  t.is(silent.openConnections(), 0, "nothing left trying in the background");
});

test("a start-up whose MySQL accepts the connection and never answers fails naming DATABASE_URL once", async (t) => {
  t.timeout(60_000);
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const url = new URL(database.url);
  const silent = await startTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
  t.teardown(() => silent.close());
  silent.stall();
  url.host = `127.0.0.1:${silent.port}`;
  const config = loadConfig({ DATABASE_URL: url.toString(), REDIS_URL: TEST_REDIS_URL });

  const started = Date.now();
  await t.throwsAsync(createApp(config, createLogger("silent")), { message: /^DATABASE_URL is unreachable/ });
  // One connection timeout of mysql2 (10 s), not four of them in a row.
  t.true(Date.now() - started < 25_000, `${Date.now() - started} ms`);
});
