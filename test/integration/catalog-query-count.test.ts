import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { BetterSqlite3QueryRunner } from "typeorm/driver/better-sqlite3/BetterSqlite3QueryRunner.js";
import { MysqlQueryRunner } from "typeorm/driver/mysql/MysqlQueryRunner.js";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ servers: Record<string, TestServer> }>;

/** Every SQL statement this process sends, counted at TypeORM's query runners (the server runs in process). */
let statements = 0;
for (const runner of [BetterSqlite3QueryRunner, MysqlQueryRunner]) {
  const query = runner.prototype.query;
  runner.prototype.query = function counted(this: unknown, ...args: Parameters<typeof query>) {
    statements++;
    return query.apply(this, args);
  } as typeof query;
}

test.before(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-query-count-"));
  t.context.servers = {
    MySQL: await startTestServer(),
    SQLite: await startTestServer({ embedded: { file: path.join(folder, "provision.sqlite") } }),
  };
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
});

async function statementsOf(work: () => Promise<{ status: number }>): Promise<number> {
  const before = statements;
  const { status } = await work();
  if (status !== 200) throw new Error(`answered ${status}`);
  return statements - before;
}

/**
 * The statements of `work` once the caller's credential is cached: for its first second an instance caches no
 * client state (its Redis subscription may not stand yet), so a call then also reads the client.
 */
function warmStatementsOf(work: () => Promise<{ status: number }>, most: number): Promise<number> {
  return pollUntil(
    `a call of at most ${most} statements`,
    async () => {
      const count = await statementsOf(work);
      return count <= most ? count : undefined;
    },
    { timeoutMs: 5000, intervalMs: 100 },
  );
}

async function productWithFeaturesAndAssets(baseUrl: string, code: string): Promise<string> {
  const created = await rest(baseUrl, "POST", PRODUCTS, { productCode: code });
  const id = created.body.id as string;
  const features = ["a", "b", "c"].map((featureCode) => ({ featureCode }));
  await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features });
  for (const metricName of ["calls", "seats"]) {
    await rest(baseUrl, "POST", `${PRODUCTS}/${id}/monitored-resources`, { metricName, metricType: 0 });
  }
  return id;
}

for (const database of ["MySQL", "SQLite"]) {
  test.serial(`${database}: a product with its features and assets is read in at most two statements`, async (t) => {
    const { baseUrl } = t.context.servers[database];
    const id = await productWithFeaturesAndAssets(baseUrl, `COUNT-${database}`);
    const get = () => rest(baseUrl, "GET", `${PRODUCTS}/${id}`);
    const first = await get();
    t.is(first.body.features.length, 3);
    t.is(first.body.monitoredAssets.length, 2);
    const count = await warmStatementsOf(get, 2);
    t.true(count >= 1 && count <= 2, `${count} statements`);
  });

  test.serial(`${database}: a page of products with their features is read in at most three statements`, async (t) => {
    const { baseUrl } = t.context.servers[database];
    for (let index = 0; index < 5; index++) await productWithFeaturesAndAssets(baseUrl, `PAGE-${database}-${index}`);
    const list = () => rest(baseUrl, "GET", `${PRODUCTS}?pageSize=20&filter=PAGE-`);
    t.is((await list()).body.items.length, 5);
    const count = await warmStatementsOf(list, 3);
    t.true(count >= 2 && count <= 3, `${count} statements`);
  });
}
