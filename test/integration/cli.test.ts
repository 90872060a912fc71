import { randomBytes } from "node:crypto";
import net from "node:net";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import mysql from "mysql2/promise";
import { accessToken, requestToken } from "../support/auth.js";
import { cli, cliFailure, cliFailureWithEnv, cliWithEnv } from "../support/cli.js";
import { activate, entitlementWithCode } from "../support/licensing.js";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ databaseUrl: string; server: TestServer; drop: () => Promise<void> }>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.databaseUrl = database.url;
  t.context.drop = database.drop;
  t.context.server = await startTestServer({ env: { DATABASE_URL: database.url } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
  await t.context.drop?.();
});

test.serial("providers create and list print JSON", async (t) => {
  const created = await cli(t.context.databaseUrl, "providers", "create", "--name", "Acme Software");
  t.regex(created.providerId, /^[0-9a-f-]{36}$/);
  t.is(created.name, "Acme Software");
  const listed = await cli(t.context.databaseUrl, "providers", "list");
  t.true(listed.some((provider: { providerId: string }) => provider.providerId === created.providerId));
});

test.serial(
  "a client created with the CLI gets tokens with its scopes and acts on its own provider only",
  async (t) => {
    const { databaseUrl, server } = t.context;
    const provider = await cli(databaseUrl, "providers", "create", "--name", "Scoped Vendor");
    const client = await cli(
      databaseUrl,
      "clients",
      "create",
      "--name",
      "ci",
      "--scopes",
      "catalog:*,entitlements:read",
      "--provider",
      provider.providerId,
    );
    t.deepEqual(client.scopes, ["catalog:*", "entitlements:read"]);
    t.is(client.providerId, provider.providerId);
    t.regex(client.clientSecret, /^pcs_[A-Za-z0-9_-]{43}$/);

    const token = await requestToken(server.baseUrl, client.clientId, client.clientSecret);
    t.is(token.status, 200);
    t.is(token.body.scope, "catalog:* entitlements:read");
    const authorization = `Bearer ${token.body.access_token}`;
    const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "CLI-1" }, { authorization });
    t.is(created.status, 200);
    t.is(created.body.providerId, provider.providerId);
    const adminView = await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
    t.is(adminView.status, 404, "the bootstrap client belongs to another provider");
    const clients = await rest(server.baseUrl, "GET", "/api/v1/provision/admin/clients", undefined, { authorization });
    t.is(clients.status, 403, "no clients scope");

    const listed = await cli(databaseUrl, "clients", "list", "--provider", provider.providerId);
    t.deepEqual(
      listed.map((entry: { clientId: string }) => entry.clientId),
      [client.clientId],
    );
    t.false(JSON.stringify(listed).includes(client.clientSecret), "the secret is shown only at creation");
    t.truthy(listed[0].lastUsedAt);

    for (const unknown of ["bogus", "0b5e55ed-0000-4000-8000-000000000000"]) {
      const refused = await cliFailure(databaseUrl, "clients", "list", "--provider", unknown);
      t.is(refused.code, 2, unknown);
      t.regex(refused.stderr, new RegExp(`no provider ${unknown}`));
    }
  },
);

/** One value of the test database, by a query answering one row with a column `n`. */
async function scalar(t: ExecutionContext<{ databaseUrl: string }>, sql: string, values: unknown[] = []) {
  const connection = await mysql.createConnection({ uri: t.context.databaseUrl });
  try {
    const [rows] = (await connection.query(sql, values)) as unknown as [{ n: unknown }[]];
    return rows[0]?.n;
  } finally {
    await connection.end();
  }
}

test.serial("rotate-secret replaces the secret and disable/enable switch the client", async (t) => {
  const { databaseUrl, server } = t.context;
  const provider = await cli(databaseUrl, "providers", "create", "--name", "Rotating Vendor");
  const client = await cli(
    databaseUrl,
    "clients",
    "create",
    "--name",
    "r",
    "--scopes",
    "catalog:read",
    "--provider",
    provider.providerId,
  );
  const products = async (token: string) =>
    (await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` })).status;
  const beforeRotation = await accessToken(server.baseUrl, client.clientId, client.clientSecret);
  t.is(await products(beforeRotation), 200);
  const rotated = await cli(databaseUrl, "clients", "rotate-secret", client.clientId);
  t.not(rotated.clientSecret, client.clientSecret);
  t.is((await requestToken(server.baseUrl, client.clientId, client.clientSecret)).status, 401);
  t.is(await products(beforeRotation), 401, "tokens issued before the rotation are revoked");
  const beforeDisable = await accessToken(server.baseUrl, client.clientId, rotated.clientSecret);
  t.is(await products(beforeDisable), 200);

  const disabled = await cli(databaseUrl, "clients", "disable", client.clientId);
  t.true(disabled.disabled);
  const refused = await requestToken(server.baseUrl, client.clientId, rotated.clientSecret);
  t.is(refused.status, 401);
  t.is(refused.body.error, "invalid_client");
  t.is(await products(beforeDisable), 401);
  await cli(databaseUrl, "clients", "enable", client.clientId);
  t.is(await products(beforeDisable), 401, "enabling again does not revive tokens issued before the disable");
  t.is(await products(await accessToken(server.baseUrl, client.clientId, rotated.clientSecret)), 200);
});

async function unusedPort(): Promise<number> {
  const nothingListening = net.createServer();
  await new Promise<void>((resolve) => nothingListening.listen(0, "127.0.0.1", () => resolve()));
  const { port } = nothingListening.address() as net.AddressInfo;
  await new Promise((resolve) => nothingListening.close(resolve));
  return port;
}

for (const [what, redisUrl] of [
  ["cannot reach Redis", async () => `redis://127.0.0.1:${await unusedPort()}`],
  ["runs without REDIS_URL", async () => ""],
] as const) {
  test.serial(`a client disabled while the CLI ${what} is refused by running instances within seconds`, async (t) => {
    const { databaseUrl, server } = t.context;
    const provider = await cli(databaseUrl, "providers", "create", "--name", "Partitioned Vendor");
    const made = ["clients", "create", "--name", "p", "--scopes", "catalog:read", "--provider", provider.providerId];
    const client = await cli(databaseUrl, ...made);
    const withoutRedis = await startTestServer({ databaseUrl, env: { REDIS_URL: "" } });
    t.teardown(() => withoutRedis.close());
    const token = await accessToken(server.baseUrl, client.clientId, client.clientSecret);
    const products = async (on: TestServer) =>
      (await rest(on.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` })).status;
    for (const on of [server, withoutRedis]) t.is(await products(on), 200);

    await cliWithEnv({ REDIS_URL: await redisUrl() }, databaseUrl, "clients", "disable", client.clientId);
    for (const [name, on] of [
      ["an instance on MySQL and Redis", server],
      ["an instance on MySQL alone", withoutRedis],
    ] as const) {
      await pollUntil(
        `${name} to refuse the disabled client's token`,
        async () => ((await products(on)) === 401 ? true : undefined),
        { timeoutMs: 5_000, intervalMs: 200 },
      );
    }
    t.pass();
  });
}

test.serial("keys rotate puts a new key in the JWKS and old tokens keep working", async (t) => {
  const { databaseUrl, server } = t.context;
  const before = await rest(server.baseUrl, "GET", "/.well-known/jwks.json");
  const rotated = await cli(databaseUrl, "keys", "rotate");
  let jwks = before;
  for (
    let attempt = 0;
    attempt < 60 && !jwks.body.keys.some((key: { kid: string }) => key.kid === rotated.kid);
    attempt++
  ) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    jwks = await rest(server.baseUrl, "GET", "/.well-known/jwks.json");
  }
  const kids = jwks.body.keys.map((key: { kid: string }) => key.kid);
  t.true(kids.includes(rotated.kid));
  for (const key of before.body.keys) t.true(kids.includes(key.kid), "the old key still verifies");
  const list = await rest(server.baseUrl, "GET", PRODUCTS);
  t.is(list.status, 200, "a token signed with the old key is still accepted");
});

test.serial(
  "keys rotate seals the first sealed key only when told to (instances without the key could not open it)",
  async (t) => {
    const { databaseUrl, server } = t.context;
    const sealing = { PROVISION_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64") };
    const keys = () => scalar(t, "SELECT COUNT(*) AS n FROM signing_keys");
    const before = await keys();
    const refused = await cliFailureWithEnv(sealing, databaseUrl, "keys", "rotate");
    t.is(refused.code, 2);
    t.regex(refused.stderr, /PROVISION_KEY_ENCRYPTION_KEY.*--seal first/s);
    t.is(await keys(), before, "no key was made");
    const token = await requestToken(server.baseUrl, server.admin.clientId, server.admin.clientSecret);
    t.is(token.status, 200, "the running instance, which has no key-encryption key, still issues tokens");
    const badValue = await cliFailureWithEnv(sealing, databaseUrl, "keys", "rotate", "--seal", "yes");
    t.is(badValue.code, 2);
    const nothingToSealWith = await cliFailure(databaseUrl, "keys", "rotate", "--seal", "first");
    t.is(nothingToSealWith.code, 2);
    t.regex(nothingToSealWith.stderr, /needs PROVISION_KEY_ENCRYPTION_KEY/);
    t.is(await keys(), before, "still no key was made");
  },
);

test("bad input answers a usage error with exit code 2", async (t) => {
  const { databaseUrl } = t.context;
  const badScope = await cliFailure(databaseUrl, "clients", "create", "--name", "x", "--scopes", "bogus:read");
  t.is(badScope.code, 2);
  t.regex(badScope.stderr, /bogus:read/);
  const noName = await cliFailure(databaseUrl, "providers", "create");
  t.is(noName.code, 2);
  t.regex(noName.stderr, /--name/);
  const unknown = await cliFailure(databaseUrl, "clients", "frobnicate");
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /usage/);
  const missing = await cliFailure(databaseUrl, "clients", "disable", "no-such-client");
  t.is(missing.code, 2);
});

test.serial("unknown or extra arguments and options answer a usage error and change nothing", async (t) => {
  const { databaseUrl } = t.context;
  const keys = () => scalar(t, "SELECT COUNT(*) AS n FROM signing_keys");
  const keysBefore = await keys();
  for (const args of [
    ["keys", "rotate", "extra", "--x"],
    ["keys", "rotate", "extra"],
    ["keys", "rotate", "--x"],
    ["keys", "rotate", "--name", "k"],
  ]) {
    const failure = await cliFailure(databaseUrl, ...args);
    t.is(failure.code, 2, args.join(" "));
    t.regex(failure.stderr, /usage: .*keys rotate/, args.join(" "));
  }
  t.is(await keys(), keysBefore, "no key was made");

  const provider = await cli(databaseUrl, "providers", "create", "--name", "Strict Vendor");
  const client = await cli(
    databaseUrl,
    ...["clients", "create", "--name", "strict", "--scopes", "catalog:read", "--provider", provider.providerId],
  );
  for (const args of [
    ["clients", "disable", client.clientId, "extra"],
    ["clients", "disable", client.clientId, "--force"],
    ["clients", "rotate-secret", client.clientId, client.clientId],
    ["clients", "list", "--provider", provider.providerId, "--all"],
    ["clients", "create", "--name", "a", "--name", "b", "--scopes", "catalog:read", "--provider", provider.providerId],
    ["providers", "list", "extra"],
  ]) {
    t.is((await cliFailure(databaseUrl, ...args)).code, 2, args.join(" "));
  }
  const [listed] = await cli(databaseUrl, "clients", "list", "--provider", provider.providerId);
  t.like(listed, { clientId: client.clientId, name: "strict", disabled: false });
});

test.serial("a name longer than the API's 255 characters is a usage error; 255 are accepted", async (t) => {
  const { databaseUrl } = t.context;
  const provider = await cli(databaseUrl, "providers", "create", "--name", "Named Vendor");
  const create = (name: string) =>
    ["clients", "create", "--name", name, "--scopes", "catalog:read", "--provider", provider.providerId] as const;
  const tooLong = await cliFailure(databaseUrl, ...create("é".repeat(256)));
  t.is(tooLong.code, 2, tooLong.stderr);
  t.regex(tooLong.stderr, /--name must be at most 255 characters/);
  t.is((await cliFailure(databaseUrl, "providers", "create", "--name", "x".repeat(256))).code, 2);
  const clientsOf = () =>
    scalar(t, "SELECT COUNT(*) AS n FROM oauth_clients WHERE provider_id = ?", [provider.providerId]);
  t.is(Number(await clientsOf()), 0);

  const longest = await cli(databaseUrl, ...create("é".repeat(255)));
  t.is(longest.name, "é".repeat(255));
  t.is(Number(await clientsOf()), 1);
});

test.serial("a provider's copyright, URL and email are set by the CLI and carried by its licenses", async (t) => {
  const { databaseUrl, server } = t.context;
  const provider = await cli(databaseUrl, "providers", "create", "--name", "Noticed", "--copyright", "© 2026 Noticed");
  t.like(provider, { copyright: "© 2026 Noticed", url: null, email: null });
  const updated = await cli(
    databaseUrl,
    ...["providers", "update", provider.providerId, "--url", "https://noticed.example/licensing"],
    ...["--email", "licensing@noticed.example", "--copyright", "© 2026 Noticed Ltd"],
  );
  t.like(updated, {
    name: "Noticed",
    copyright: "© 2026 Noticed Ltd",
    url: "https://noticed.example/licensing",
    email: "licensing@noticed.example",
  });
  for (const [option, value] of [
    ["--url", "ftp://noticed.example"],
    ["--email", "not an address"],
    ["--copyright", "c".repeat(256)],
  ]) {
    const refused = await cliFailure(databaseUrl, "providers", "update", provider.providerId, option, value);
    t.is(refused.code, 2, option);
    t.regex(refused.stderr, new RegExp(`^${option} `), option);
  }
  t.is((await cliFailure(databaseUrl, "providers", "update", provider.providerId)).code, 2, "nothing to change");

  const client = await cli(
    ...[databaseUrl, "clients", "create", "--name", "noticed", "--scopes", "catalog:*,entitlements:*"],
    ...["--provider", provider.providerId],
  );
  const authorization = `Bearer ${await accessToken(server.baseUrl, client.clientId, client.clientSecret)}`;
  const { code } = await entitlementWithCode(server.baseUrl, {}, undefined, {}, { authorization });
  const license = await activate(server.baseUrl, { activationCode: code, fingerprint: "noticed" });
  t.like(license.body, {
    copyright: "© 2026 Noticed Ltd",
    providerUrl: "https://noticed.example/licensing",
    providerEmail: "licensing@noticed.example",
  });
  const cleared = await cli(databaseUrl, "providers", "update", provider.providerId, "--email", "");
  t.is(cleared.email, null, '"" clears it');
  const relicensed = await pollUntil(
    "the running instance to be told of the change",
    async () => {
      const again = await activate(server.baseUrl, { activationCode: code, fingerprint: "noticed" });
      return again.body.providerEmail === "" ? again.body : undefined;
    },
    { timeoutMs: 1000, intervalMs: 20 },
  );
  t.like(relicensed, { copyright: "© 2026 Noticed Ltd", providerUrl: "https://noticed.example/licensing" });
});
