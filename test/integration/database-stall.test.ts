import anyTest, { type TestFn } from "ava";
import type { DataSource } from "typeorm";
import { poolShapeProblem, watchStalledStatements } from "../../src/platform/stalled-statements.js";
import { collectingLogger } from "../support/collected-logs.js";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { startBehindProxy, type TestServer } from "../support/test-server.js";

// MySQL gone silent (a network partition: no reset, nothing answered) must not hold requests, and the pooled
// connections they hold, until TCP gives up about fifteen minutes later: a statement that hears nothing for
// DATABASE_STALL_SECONDS fails as a lost connection, and the pool makes new connections once MySQL answers again.
const STALL_MS = 2000;
const POOL_SIZE = 12;
const test = anyTest as TestFn<{ server: TestServer; proxy: TcpProxy; close: () => Promise<void> }>;

test.before(async (t) => {
  Object.assign(
    t.context,
    await startBehindProxy(startTcpProxy, {
      env: { DATABASE_STALL_SECONDS: String(STALL_MS / 1000), DATABASE_POOL_SIZE: String(POOL_SIZE) },
    }),
  );
});

test.after.always(async (t) => {
  t.context.proxy?.resume();
  await t.context.close?.();
});

/**
 * A request the test gives up on (failing) rather than wait for the network to come back: before mysql2's 10 s
 * connect timeout, which would end a request that waits for a new connection.
 */
function vendorCall(server: TestServer, method: string, path: string, body?: object) {
  return fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
    body: body && JSON.stringify(body),
    signal: AbortSignal.timeout(8_000),
  });
}

test.serial("statements on a silent MySQL fail as the database out of reach, and the service recovers", async (t) => {
  const { server, proxy } = t.context;
  const made = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "STALL", productVersion: "1", name: "A" });
  t.is(made.status, 200);
  const linesBefore = server.logs.length;
  proxy.stall();
  t.teardown(() => proxy.resume());

  const listed = await vendorCall(server, "GET", PRODUCTS);
  t.is(listed.status, 503);
  t.is(((await listed.json()) as { type: string }).type, "urn:provision:problem:database-unavailable");
  const updated = await vendorCall(server, "PUT", `${PRODUCTS}/${made.body.id}`, { name: "B" });
  t.is(updated.status, 503);
  t.is(((await updated.json()) as { type: string }).type, "urn:provision:problem:database-unavailable");
  // A product's INSERT runs alone, as a prepared statement on a pooled connection of its own.
  const created = await vendorCall(server, "POST", PRODUCTS, { productCode: "STALL2", productVersion: "1", name: "C" });
  t.is(created.status, 503);
  t.is(((await created.json()) as { type: string }).type, "urn:provision:problem:database-unavailable");
  t.true(
    server.logs.slice(linesBefore).some((line) => line.includes("STATEMENT_STALLED")),
    "the warning names the stall",
  );

  proxy.resume();
  const read = await pollUntil("MySQL is read again", async () => {
    const answer = await rest(server.baseUrl, "GET", `${PRODUCTS}/${made.body.id}`);
    return answer.status === 503 ? undefined : answer;
  });
  t.is(read.status, 200);
  t.is(read.body.name, "A", "the update failed before its COMMIT: nothing of it landed");
  t.is((await rest(server.baseUrl, "PUT", `${PRODUCTS}/${made.body.id}`, { name: "B" })).status, 200);
});

test.serial(
  "requests queued behind a silent MySQL are all answered within the bound, and later ones at once",
  async (t) => {
    const { server, proxy } = t.context;
    t.is((await rest(server.baseUrl, "GET", PRODUCTS)).status, 200);
    proxy.stall();
    t.teardown(() => proxy.resume());
    const started = Date.now();
    // Eight times the pool: without a fail-fast state each new connection made for the queue waits its own bound.
    const answers = await Promise.all(
      Array.from({ length: 8 * POOL_SIZE }, async () => {
        const answer = await vendorCall(server, "GET", PRODUCTS);
        return {
          status: answer.status,
          type: ((await answer.json()) as { type: string }).type,
          at: Date.now() - started,
        };
      }),
    );
    for (const answer of answers) {
      t.is(answer.status, 503);
      t.is(answer.type, "urn:provision:problem:database-unavailable");
      // The bound, then a new connection's check (at most 2 s): about twice the bound.
      t.true(answer.at < 3 * STALL_MS, `answered after ${answer.at} ms`);
    }
    const askedLater = Date.now();
    const later = await vendorCall(server, "GET", PRODUCTS);
    t.is(later.status, 503);
    t.true(Date.now() - askedLater < STALL_MS, "refused without waiting on the silence again");
    t.true(server.logs.some((line) => line.includes("MySQL is silent")));

    proxy.resume();
    await pollUntil(
      "the service reads MySQL again",
      async () => ((await rest(server.baseUrl, "GET", PRODUCTS)).status === 200 ? true : undefined),
      { timeoutMs: 10_000 },
    );
    t.true(server.logs.some((line) => line.includes("MySQL answers again")));
  },
);

test.serial("idle connections lost in the silence are not waited on once MySQL answers new ones", async (t) => {
  const { server, proxy } = t.context;
  await Promise.all(Array.from({ length: POOL_SIZE }, () => rest(server.baseUrl, "GET", PRODUCTS)));
  const linesBefore = server.logs.length;
  proxy.stall();
  t.teardown(() => proxy.resume());
  t.is((await vendorCall(server, "GET", PRODUCTS)).status, 503);
  await pollUntil("the silence is found", () =>
    server.logs.slice(linesBefore).some((line) => line.includes("MySQL is silent")) ? true : undefined,
  );
  const healed = Date.now();
  proxy.resume({ oldConnectionsStaySilent: true });
  await pollUntil(
    "the service reads MySQL again",
    async () => ((await vendorCall(server, "GET", PRODUCTS)).status === 200 ? true : undefined),
    { timeoutMs: 3 * STALL_MS },
  );
  t.true(Date.now() - healed < 3 * STALL_MS, "no idle connection of before was waited on");
});

test.serial("one statement silent for the bound on a MySQL that answers fails alone", async (t) => {
  const { server } = t.context;
  const linesBefore = server.logs.length;
  const sleeping = server.app.dataSource.query(`SELECT SLEEP(${(STALL_MS / 1000) * 2}) AS slept`);
  await t.throwsAsync(sleeping, { message: /sent nothing/ });
  for (let round = 0; round < 5; round++) {
    t.is((await rest(server.baseUrl, "GET", PRODUCTS)).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  t.false(server.logs.slice(linesBefore).some((line) => line.includes("MySQL is silent")));
});

test.serial("a statement that waits for a lock shorter than the bound is left alone", async (t) => {
  const { server } = t.context;
  const [{ slept }] = (await server.app.dataSource.query("SELECT SLEEP(1) AS slept")) as { slept: number }[];
  t.is(Number(slept), 0, "1 s of silence, under the 2 s bound, ends normally");
});

test.serial("the installed mysql2 has what the watch reads, and a pool without it is left unwatched", async (t) => {
  const { server } = t.context;
  const pool = (server.app.dataSource.driver as unknown as { pool: unknown }).pool;
  t.is(poolShapeProblem(pool), undefined);
  t.false(server.logs.some((line) => line.includes("not watched for silence")));

  const { logger, lines: logs } = collectingLogger();
  const changedPool = { pool: { _allConnections: undefined } };
  const stop = watchStalledStatements({ driver: changedPool } as unknown as DataSource, 2000, logger);
  stop();
  t.is(logs.filter((line) => line.includes("not watched for silence")).length, 1);
  t.regex(logs[0], /_allConnections/);
});
