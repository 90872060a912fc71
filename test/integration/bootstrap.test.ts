import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import test, { type ExecutionContext } from "ava";
import mysql from "mysql2/promise";
import { createApp } from "../../src/app.js";
import { bootstrapIdentity } from "../../src/auth/bootstrap.js";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { hashSecret, verifySecret } from "../../src/auth/secrets.js";
import { systemClock } from "../../src/platform/clock.js";
import { loadConfig } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { accessToken, requestToken } from "../support/auth.js";
import { spawnProvision } from "../support/provision-process.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, TEST_REDIS_URL } from "../support/test-server.js";

function configOn(databaseUrl: string, env: Record<string, string> = {}) {
  return loadConfig({ DATABASE_URL: databaseUrl, REDIS_URL: TEST_REDIS_URL, ...env });
}

function appOn(databaseUrl: string, env: Record<string, string> = {}) {
  return createApp(configOn(databaseUrl, env), createLogger("silent"));
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

test("a bootstrap client an operator disabled stays disabled at the next start", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const env = {
    PROVISION_BOOTSTRAP_CLIENT_ID: `boot-${randomBytes(4).toString("hex")}`,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: randomBytes(32).toString("base64url"),
  };
  const first = await appOn(database.url, env);
  await new IdentityRepository(first.dataSource).updateClient(env.PROVISION_BOOTSTRAP_CLIENT_ID, { disabled: true });
  await first.close();

  const again = await startTestServer({ databaseUrl: database.url, env });
  t.teardown(() => again.close());
  t.true(again.app.bootstrap.kind === "configured-client" && again.app.bootstrap.disabled);
  const refused = await requestToken(
    again.baseUrl,
    env.PROVISION_BOOTSTRAP_CLIENT_ID,
    env.PROVISION_BOOTSTRAP_CLIENT_SECRET,
  );
  t.is(refused.status, 401, "no token for a disabled client");
  t.true(again.logs.some((line) => line.includes("the bootstrap client is disabled")));
});

for (const storage of ["mysql", "embedded"] as const) {
  test(`${storage}: a new configured secret at the next start replaces the old one, and the tokens issued under it`, async (t) => {
    const where = await storageFor(storage, t);
    const clientId = `boot-${randomBytes(4).toString("hex")}`;
    const oldSecret = randomBytes(32).toString("base64url");
    const newSecret = randomBytes(32).toString("base64url");
    const startWith = (secret: string) =>
      startTestServer({
        ...where,
        env: { PROVISION_BOOTSTRAP_CLIENT_ID: clientId, PROVISION_BOOTSTRAP_CLIENT_SECRET: secret },
      });

    const first = await startWith(oldSecret);
    const oldToken = `Bearer ${await accessToken(first.baseUrl, clientId, oldSecret)}`;
    t.is((await rest(first.baseUrl, "GET", PRODUCTS, undefined, { authorization: oldToken })).status, 200);
    await first.close();

    const same = await startWith(oldSecret);
    t.deepEqual(same.app.bootstrap, { kind: "configured-client", clientId, created: false });
    t.is((await rest(same.baseUrl, "GET", PRODUCTS, undefined, { authorization: oldToken })).status, 200);
    await same.close();

    const rotated = await startWith(newSecret);
    t.teardown(() => rotated.close());
    t.is((await requestToken(rotated.baseUrl, clientId, oldSecret)).status, 401, "the old secret");
    t.is((await rest(rotated.baseUrl, "GET", PRODUCTS, undefined, { authorization: oldToken })).status, 401);
    const newToken = `Bearer ${await accessToken(rotated.baseUrl, clientId, newSecret)}`;
    t.is((await rest(rotated.baseUrl, "GET", PRODUCTS, undefined, { authorization: newToken })).status, 200);
  });
}

test("a secret checked ahead against a hash that has changed since is checked again under the lock", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const clientId = `boot-${randomBytes(4).toString("hex")}`;
  const env = { PROVISION_BOOTSTRAP_CLIENT_ID: clientId, PROVISION_BOOTSTRAP_CLIENT_SECRET: "a".repeat(40) };
  const app = await appOn(database.url, env);
  t.teardown(() => app.close());
  const identity = new IdentityRepository(app.dataSource);
  const before = await identity.findClient(clientId);

  const rotatedConfig = configOn(database.url, { ...env, PROVISION_BOOTSTRAP_CLIENT_SECRET: "b".repeat(40) }).auth;
  // As if another instance had rotated the secret after this one's early check said "unchanged".
  const stale = Promise.resolve({ kind: "checked" as const, storedHash: "scrypt$no-longer-stored", matches: true });
  await bootstrapIdentity(identity, rotatedConfig, systemClock, randomUUID, stale);
  const after = await identity.findClient(clientId);
  t.not(after?.secretHash, before?.secretHash, "the new secret was stored");
  t.true(await verifySecret("b".repeat(40), after?.secretHash ?? ""));
  t.not(after?.tokenGeneration, before?.tokenGeneration, "the old tokens were revoked");
});

test("a secret hashed ahead is stored only for the secret it was made from", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const clientId = `boot-${randomBytes(4).toString("hex")}`;
  const configured = "c".repeat(40);
  const app = await appOn(database.url);
  t.teardown(() => app.close());
  const identity = new IdentityRepository(app.dataSource);
  const config = configOn(database.url, {
    PROVISION_BOOTSTRAP_CLIENT_ID: clientId,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: configured,
  }).auth;
  const otherSecret = Promise.resolve({
    kind: "hashed" as const,
    secret: "d".repeat(40),
    hash: await hashSecret("d".repeat(40)),
  });
  await bootstrapIdentity(identity, config, systemClock, randomUUID, otherSecret);
  const stored = (await identity.findClient(clientId))?.secretHash ?? "";
  t.true(await verifySecret(configured, stored), "the configured secret was hashed afresh");
  t.false(await verifySecret("d".repeat(40), stored));
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

/** Where a test's successive servers keep their data: one MySQL database, or one SQLite file. */
async function storageFor(storage: "mysql" | "embedded", t: ExecutionContext) {
  if (storage === "embedded") {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-bootstrap-"));
    t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
    return { embedded: { file: path.join(directory, "provision.sqlite") } };
  }
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  return { databaseUrl: database.url };
}

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
