import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import mysql from "mysql2";
import { BetterSqlite3QueryRunner } from "typeorm/driver/better-sqlite3/BetterSqlite3QueryRunner.js";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ servers: Record<string, TestServer> }>;

/**
 * Every SQL statement this process sends (the servers run in process), counted per database: on MySQL at mysql2's
 * connections, where TypeORM's queries and the prepared statements sent past it both go, but for the invalidation
 * log each MySQL instance reads every second in the background; on SQLite at TypeORM's query runner, but for
 * transaction control (each embedded write runs in a savepoint of a commit it shares, see SqliteCommitQueue).
 */
const NOT_COUNTED = {
  MySQL: /\bcache_invalidations\b/i,
  SQLite: /^(?:BEGIN|SAVEPOINT|RELEASE|COMMIT|ROLLBACK)\b/i,
};
type Database = keyof typeof NOT_COUNTED;
const statements: Record<Database, number> = { MySQL: 0, SQLite: 0 };
const counted: [object, string, Database][] = [
  [mysql.Connection.prototype, "query", "MySQL"],
  [mysql.Connection.prototype, "execute", "MySQL"],
  [BetterSqlite3QueryRunner.prototype, "query", "SQLite"],
];
for (const [prototype, name, database] of counted) {
  const methods = prototype as Record<string, (...args: unknown[]) => unknown>;
  const original = methods[name];
  methods[name] = function countedCall(this: unknown, ...args: unknown[]) {
    if (!NOT_COUNTED[database].test(sqlOf(args[0]))) statements[database]++;
    return original.apply(this, args);
  };
}

function sqlOf(statement: unknown): string {
  if (typeof statement === "string") return statement;
  const sql = (statement as { sql?: unknown } | undefined)?.sql;
  return typeof sql === "string" ? sql : "";
}

/** The webhook worker and the scheduler poll the database in the background: not while statements are counted. */
const QUIET = { WEBHOOK_POLL_INTERVAL_MS: "60000", SCHEDULER_INTERVAL_MS: "3600000" };

test.before(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-query-count-"));
  t.context.servers = {
    MySQL: await startTestServer({ env: QUIET }),
    SQLite: await startTestServer({ env: QUIET, embedded: { file: path.join(folder, "provision.sqlite") } }),
  };
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
});

async function statementsOf(
  database: Database,
  work: () => Promise<{ status: number }>,
  expectedStatus = 200,
): Promise<number> {
  const before = statements[database];
  const { status } = await work();
  if (status !== expectedStatus) throw new Error(`answered ${status}`);
  return statements[database] - before;
}

/**
 * The statements of `work` once the caller's credential is cached: for its first second an instance caches no
 * client state (its Redis subscription may not stand yet), so a call then also reads the client.
 */
function warmStatementsOf(database: Database, work: () => Promise<{ status: number }>, most: number): Promise<number> {
  return pollUntil(
    `a call of at most ${most} statements`,
    async () => {
      const count = await statementsOf(database, work);
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

for (const database of ["MySQL", "SQLite"] as const) {
  test.serial(
    `${database}: a product with its features and assets is read in at most two statements, then from memory`,
    async (t) => {
      const { baseUrl } = t.context.servers[database];
      const id = await productWithFeaturesAndAssets(baseUrl, `COUNT-${database}`);
      const get = () => rest(baseUrl, "GET", `${PRODUCTS}/${id}`);
      const first = await get();
      t.is(first.body.features.length, 3);
      t.is(first.body.monitoredAssets.length, 2);
      t.is(await warmStatementsOf(database, get, 0), 0, "a remembered product (and credential) costs no statement");
      t.is((await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { name: "renamed" })).status, 200);
      let changed: { name?: string } = {};
      const count = await statementsOf(database, async () => {
        const response = await get();
        changed = response.body;
        return response;
      });
      t.is(changed.name, "renamed");
      t.true(count >= 1 && count <= 2, `${count} statements for the first read after a change`);
    },
  );

  test.serial(`${database}: a page of products with their features is read in at most three statements`, async (t) => {
    const { baseUrl } = t.context.servers[database];
    for (let index = 0; index < 5; index++) await productWithFeaturesAndAssets(baseUrl, `PAGE-${database}-${index}`);
    const list = () => rest(baseUrl, "GET", `${PRODUCTS}?pageSize=20&filter=PAGE-`);
    t.is((await list()).body.items.length, 5);
    const count = await warmStatementsOf(database, list, 3);
    t.true(count >= 2 && count <= 3, `${count} statements`);
  });
  test.serial(`${database}: a create is one statement, and so is a create refused for a taken code`, async (t) => {
    const { baseUrl } = t.context.servers[database];
    let sequence = 0;
    const create = () => rest(baseUrl, "POST", PRODUCTS, { productCode: `ONE-${database}-${++sequence}` });
    t.is(await warmStatementsOf(database, create, 1), 1);
    const taken = () => rest(baseUrl, "POST", PRODUCTS, { productCode: `ONE-${database}-1` });
    t.is(await statementsOf(database, taken, 409), 1);
  });
}
