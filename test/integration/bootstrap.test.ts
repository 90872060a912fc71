import { randomBytes } from "node:crypto";
import test from "ava";
import { createApp } from "../../src/app.js";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { loadConfig } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
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
