import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { createClient as createRedisClient } from "@redis/client";
import anyTest, { type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import { CLIENTS, createClient } from "../support/oauth-clients.js";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";

const run = promisify(execFile);
const test = anyTest as TestFn<{ first: TestServer; second: TestServer; databaseUrl: string; drop(): Promise<void> }>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.databaseUrl = database.url;
  t.context.drop = database.drop;
  t.context.first = await startTestServer({ databaseUrl: database.url });
  t.context.second = await startTestServer({ databaseUrl: database.url });
});

test.after.always(async (t) => {
  await t.context.first?.close();
  await t.context.second?.close();
  await t.context.drop?.();
});

/** A client and a token of it that the second instance has already accepted (and so remembers). */
async function tokenKnownToSecond(t: import("ava").ExecutionContext<{ first: TestServer; second: TestServer }>) {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  const token = await accessToken(first.baseUrl, client.clientId, client.clientSecret);
  for (let i = 0; i < 3; i++) {
    t.is((await listAs(second, token)).status, 200);
  }
  return { ...client, token };
}

function listAs(server: TestServer, token: string) {
  return rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` });
}

/** The second instance's answer once it refuses `token`; fails when that takes over a second. */
function refusedBySecond(second: TestServer, token: string) {
  return pollUntil(
    "the second instance to refuse the revoked token",
    async () => {
      const response = await listAs(second, token);
      return response.status === 200 ? undefined : response;
    },
    { timeoutMs: 1000, intervalMs: 20 },
  );
}

test("a client disabled through one instance has its tokens refused by another within a second", async (t) => {
  const { first, second } = t.context;
  const { clientId, token } = await tokenKnownToSecond(t);
  t.is((await rest(first.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/false`)).status, 200);
  const refused = await refusedBySecond(second, token);
  t.is(refused.status, 401);
  t.is(refused.body.type, "urn:provision:problem:invalid-token");
});

test("a secret rotated through one instance revokes the old tokens on another within a second", async (t) => {
  const { first, second } = t.context;
  const { clientId, token } = await tokenKnownToSecond(t);
  t.is((await rest(first.baseUrl, "POST", `${CLIENTS}/${clientId}/secret`, {})).status, 200);
  t.is((await refusedBySecond(second, token)).status, 401);
});

test("a client deleted through one instance has its tokens refused by another within a second", async (t) => {
  const { first, second } = t.context;
  const { clientId, token } = await tokenKnownToSecond(t);
  t.is((await rest(first.baseUrl, "DELETE", `${CLIENTS}/${clientId}`)).status, 200);
  t.is((await refusedBySecond(second, token)).status, 401);
});

test("a client disabled with the CLI has its tokens refused by running instances within a second", async (t) => {
  const { clientId, token } = await tokenKnownToSecond(t);
  await run(process.execPath, ["--import", "tsx", "src/cli/main.ts", "clients", "disable", clientId], {
    env: { ...process.env, DATABASE_URL: t.context.databaseUrl, REDIS_URL: TEST_REDIS_URL },
  });
  t.is((await refusedBySecond(t.context.first, token)).status, 401);
  t.is((await refusedBySecond(t.context.second, token)).status, 401);
});

test("a token still valid keeps working on both instances after another client is revoked", async (t) => {
  const { first, second } = t.context;
  const kept = await tokenKnownToSecond(t);
  const revoked = await tokenKnownToSecond(t);
  t.is((await rest(first.baseUrl, "PUT", `${CLIENTS}/${revoked.clientId}/enabled/false`)).status, 200);
  await refusedBySecond(second, revoked.token);
  t.is((await listAs(second, kept.token)).status, 200);
  t.is((await listAs(first, kept.token)).status, 200);
});

test("fetching tokens tells no instance of a change; disabling the client does", async (t) => {
  const { first } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  const heard: string[] = [];
  const subscriber = createRedisClient({ url: TEST_REDIS_URL });
  await subscriber.connect();
  t.teardown(() => subscriber.close());
  await subscriber.subscribe("provision:invalidate:client-changed", (clientId) => heard.push(clientId));
  for (let i = 0; i < 3; i++) await accessToken(first.baseUrl, client.clientId, client.clientSecret);
  t.is((await rest(first.baseUrl, "PUT", `${CLIENTS}/${client.clientId}/enabled/false`)).status, 200);
  const ofThisClient = () => heard.filter((clientId) => clientId === client.clientId);
  await pollUntil("the change to be published", () => (ofThisClient().length > 0 ? true : undefined));
  t.is(ofThisClient().length, 1, "only the disabling was published");
});
