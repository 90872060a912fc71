import anyTest, { type TestFn } from "ava";
import { requestToken } from "../support/auth.js";
import { cli, cliFailure } from "../support/cli.js";
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
  },
);

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
  const rotated = await cli(databaseUrl, "clients", "rotate-secret", client.clientId);
  t.not(rotated.clientSecret, client.clientSecret);
  t.is((await requestToken(server.baseUrl, client.clientId, client.clientSecret)).status, 401);
  t.is((await requestToken(server.baseUrl, client.clientId, rotated.clientSecret)).status, 200);

  const disabled = await cli(databaseUrl, "clients", "disable", client.clientId);
  t.true(disabled.disabled);
  const refused = await requestToken(server.baseUrl, client.clientId, rotated.clientSecret);
  t.is(refused.status, 401);
  t.is(refused.body.error, "invalid_client");
  await cli(databaseUrl, "clients", "enable", client.clientId);
  t.is((await requestToken(server.baseUrl, client.clientId, rotated.clientSecret)).status, 200);
});

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
