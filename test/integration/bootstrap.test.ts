import { randomBytes } from "node:crypto";
import net from "node:net";
import test from "ava";
import mysql from "mysql2/promise";
import { createApp } from "../../src/app.js";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { loadConfig } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { requestToken } from "../support/auth.js";
import { spawnProvision } from "../support/provision-process.js";
import { createTestDatabase, TEST_REDIS_URL } from "../support/test-server.js";

function appOn(databaseUrl: string, env: Record<string, string> = {}) {
  const config = loadConfig({ DATABASE_URL: databaseUrl, REDIS_URL: TEST_REDIS_URL, ...env });
  return createApp(config, createLogger("silent"));
}

test("with bootstrap variables, start-up ensures that client with all scopes, idempotently", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const clientId = `boot-${randomBytes(4).toString("hex")}`;
  const firstSecret = randomBytes(32).toString("base64url");
  const first = await appOn(database.url, {
    PROVISION_BOOTSTRAP_CLIENT_ID: clientId,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: firstSecret,
  });
  t.deepEqual(first.bootstrap, { kind: "configured-client", clientId, created: true });
  await first.close();

  const again = await appOn(database.url, {
    PROVISION_BOOTSTRAP_CLIENT_ID: clientId,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: firstSecret,
  });
  t.deepEqual(again.bootstrap, { kind: "configured-client", clientId, created: false });
  const identity = new IdentityRepository(again.dataSource);
  const row = await identity.findClient(clientId);
  t.is(row?.scopes, "*");
  t.is(await identity.countClients(), 1);
  await again.close();
});

test("without bootstrap variables, the first start on an empty database makes one client and hands its secret once", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const first = await appOn(database.url);
  t.is(first.bootstrap.kind, "first-client");
  const secret = first.bootstrap.kind === "first-client" ? first.bootstrap.clientSecret : "";
  t.regex(secret, /^pcs_/);
  await first.close();
  const second = await appOn(database.url);
  t.deepEqual(second.bootstrap, { kind: "nothing" });
  t.is(await new IdentityRepository(second.dataSource).countClients(), 1);
  await second.close();
});

test("instances starting at once on an empty database make exactly one first client and one signing key", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const apps = await Promise.all([appOn(database.url), appOn(database.url), appOn(database.url)]);
  t.teardown(() => Promise.all(apps.map((app) => app.close())));
  t.deepEqual(apps.map((app) => app.bootstrap.kind).sort(), ["first-client", "nothing", "nothing"]);
  const identity = new IdentityRepository(apps[0].dataSource);
  t.is(await identity.countClients(), 1);
  t.is((await identity.listSigningKeys()).length, 1);
});

/** A local port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The OAuth clients stored in a database; 0 when its tables do not exist yet. */
async function clientCount(databaseUrl: string): Promise<number> {
  const connection = await mysql.createConnection({ uri: databaseUrl });
  try {
    const [tables] = (await connection.query(
      "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'oauth_clients'",
    )) as unknown as [{ n: number }[]];
    if (Number(tables[0].n) === 0) return 0;
    const [rows] = (await connection.query("SELECT COUNT(*) AS n FROM oauth_clients")) as unknown as [{ n: number }[]];
    return Number(rows[0].n);
  } finally {
    await connection.end();
  }
}

test("a first start that cannot reach Redis makes no client; the next start prints the first client's secret", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const env = {
    DATABASE_URL: database.url,
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
    // Every test file shares one Redis and so 127.0.0.1's request counter, as startTestServer knows.
    TOKEN_RATE_LIMIT_PER_ADDRESS: "100000",
    ACTIVATION_RATE_LIMIT_PER_ADDRESS: "100000",
  };

  const failed = spawnProvision({ ...env, REDIS_URL: `redis://127.0.0.1:${await closedPort()}` });
  t.teardown(() => failed.kill());
  const exit = await failed.exitWithin(30_000);
  t.is(exit?.code, 1, `stderr: ${failed.stderr()}`);
  t.regex(failed.stderr(), /REDIS_URL is unreachable/);
  t.false(failed.stdout().includes("clientSecret"), "no secret was shown");
  t.is(await clientCount(database.url), 0, "no client was made whose secret nobody saw");

  const started = spawnProvision({ ...env, REDIS_URL: TEST_REDIS_URL });
  t.teardown(() => started.kill());
  const listening = await started.waitForLog((record) => record.msg === "provision is listening");
  const notice = started.logRecords().find((record) => typeof record.clientSecret === "string");
  t.truthy(notice, started.stdout());
  t.regex(notice?.notice ?? "", /first start/);
  t.is(await clientCount(database.url), 1);
  const token = await requestToken(`http://127.0.0.1:${listening.port}`, notice?.clientId, notice?.clientSecret);
  t.is(token.status, 200, "the printed secret works");

  started.child.kill("SIGTERM");
  t.is((await started.exitWithin(15_000))?.code, 0);
});
