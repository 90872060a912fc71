import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose";
import mysql from "mysql2/promise";
import { KEY_REFRESH_MS, PUBLISH_BEFORE_SIGNING_MS } from "../../src/auth/key-store.js";
import { runCli } from "../../src/cli/commands.js";
import { accessToken } from "../support/auth.js";
import { manualClock } from "../support/manual-clock.js";
import { createClient } from "../support/oauth-clients.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn;

/** Token lifetime plus clock skew: how long after its retirement a key may still verify a token. */
const RETIRED_KEY_VALIDITY_MS = (600 + 30) * 1000;

async function kids(server: TestServer): Promise<string[]> {
  const response = await fetch(`${server.baseUrl}/.well-known/jwks.json`);
  const { keys } = (await response.json()) as JSONWebKeySet;
  return keys.map((key) => key.kid ?? "").sort();
}

function kidOf(token: string): string {
  return decodeProtectedHeader(token).kid ?? "";
}

async function productsStatus(server: TestServer, token: string): Promise<number> {
  return (await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` })).status;
}

/** A fresh token of a new catalog:read client of `server`, from its token endpoint. */
async function readerToken(server: TestServer, client?: { clientId: string; clientSecret: string }) {
  const reader = client ?? (await createClient(server.baseUrl, ["catalog:read"]));
  return accessToken(server.baseUrl, reader.clientId, reader.clientSecret);
}

async function sharedDatabase(t: import("ava").ExecutionContext) {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  return database;
}

async function start(t: import("ava").ExecutionContext, options: Parameters<typeof startTestServer>[0]) {
  const server = await startTestServer(options);
  t.teardown(() => server.close());
  return server;
}

test("a rotated-in key is published at once and signs once every instance has had time to load it", async (t) => {
  const clock = manualClock();
  const server = await start(t, { clock });
  const reader = await createClient(server.baseUrl, ["catalog:read"]);
  const before = await readerToken(server, reader);
  const oldKid = kidOf(before);

  clock.advance(60_000);
  const newKid = await server.app.keys.rotate();
  t.not(newKid, oldKid);
  t.deepEqual(await kids(server), [oldKid, newKid].sort(), "published at once");
  t.is(kidOf(await readerToken(server, reader)), oldKid, "not signing yet");
  clock.advance(PUBLISH_BEFORE_SIGNING_MS);
  const after = await readerToken(server, reader);
  t.is(kidOf(after), newKid);
  t.is(await productsStatus(server, before), 200);
  t.is(await productsStatus(server, after), 200);

  clock.advance(590_000 - 60_000 - PUBLISH_BEFORE_SIGNING_MS); // 590 s after the old token was signed
  t.is(await productsStatus(server, before), 200);
  clock.advance(41_000); // 631 s: the old token has expired, skew included
  t.is(await productsStatus(server, before), 401);
  t.is(await productsStatus(server, after), 200);
});

test("a replaced key leaves the JWKS once no token it signed can still be alive", async (t) => {
  const clock = manualClock();
  const server = await start(t, { clock });
  const [oldKid] = await kids(server);
  const newKid = await server.app.keys.rotate();
  t.deepEqual(await kids(server), [oldKid, newKid].sort());

  // The old key signs until the new one is published, and its last tokens live a lifetime plus skew.
  clock.advance(PUBLISH_BEFORE_SIGNING_MS + RETIRED_KEY_VALIDITY_MS - 1000);
  t.deepEqual(await kids(server), [oldKid, newKid].sort());
  clock.advance(2000);
  t.deepEqual(await kids(server), [newKid]);
});

test("two instances on one database sign with the same key and accept each other's tokens", async (t) => {
  const database = await sharedDatabase(t);
  const first = await start(t, { databaseUrl: database.url });
  const second = await start(t, { databaseUrl: database.url });
  t.deepEqual(await kids(first), await kids(second));
  t.is((await kids(first)).length, 1);

  const fromFirst = await readerToken(first);
  const fromSecond = await readerToken(second);
  t.is(kidOf(fromFirst), kidOf(fromSecond));
  t.is(await productsStatus(second, fromFirst), 200);
  t.is(await productsStatus(first, fromSecond), 200);
});

test("after one instance rotates, another accepts the first token signed with the new key", async (t) => {
  const database = await sharedDatabase(t);
  const clock = manualClock();
  const first = await start(t, { databaseUrl: database.url, clock });
  const second = await start(t, { databaseUrl: database.url, clock });
  const reader = await createClient(first.baseUrl, ["catalog:read"]);
  const oldKid = kidOf(await readerToken(second, reader));

  const newKid = await first.app.keys.rotate();
  t.is(kidOf(await readerToken(first, reader)), oldKid, "the new key does not sign before it is published");
  clock.advance(PUBLISH_BEFORE_SIGNING_MS);
  const fromFirst = await readerToken(first, reader);
  t.is(kidOf(fromFirst), newKid);
  t.is(await productsStatus(second, fromFirst), 200);
  t.is(kidOf(await readerToken(second, reader)), newKid, "both instances sign with the new key");
  t.deepEqual(await kids(second), [oldKid, newKid].sort());
});

test("with a key-encryption key, private keys are stored sealed and never in clear", async (t) => {
  const database = await sharedDatabase(t);
  const keyEncryptionKey = randomBytes(32).toString("base64");
  const server = await start(t, {
    databaseUrl: database.url,
    env: { PROVISION_KEY_ENCRYPTION_KEY: keyEncryptionKey },
  });
  await server.app.keys.rotate();
  const connection = await mysql.createConnection({ uri: database.url });
  t.teardown(() => connection.end());
  const [rows] = (await connection.query("SELECT kid, public_jwk, private_jwk FROM signing_keys")) as unknown as [
    { kid: string; public_jwk: string; private_jwk: string }[],
  ];
  t.is(rows.length, 2);
  for (const row of rows) {
    t.true(row.private_jwk.startsWith("aes256gcm:"), row.private_jwk.slice(0, 16));
    t.false(row.private_jwk.includes('"d"'));
    t.false(row.private_jwk.includes("{"));
    t.false("d" in JSON.parse(row.public_jwk));
  }
  t.is(await productsStatus(server, await readerToken(server)), 200);
});

test("an instance given another key-encryption key than the stored keys were sealed with does not start", async (t) => {
  const database = await sharedDatabase(t);
  const keyEncryptionKey = randomBytes(32).toString("base64");
  const first = await startTestServer({
    databaseUrl: database.url,
    env: { PROVISION_KEY_ENCRYPTION_KEY: keyEncryptionKey },
  });
  await first.close();

  await t.throwsAsync(
    startTestServer({
      databaseUrl: database.url,
      env: { PROVISION_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64") },
    }),
    { message: /PROVISION_KEY_ENCRYPTION_KEY/ },
  );
  await t.throwsAsync(startTestServer({ databaseUrl: database.url }), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });

  const again = await start(t, { databaseUrl: database.url, env: { PROVISION_KEY_ENCRYPTION_KEY: keyEncryptionKey } });
  t.is(await productsStatus(again, await readerToken(again)), 200);
});

test("an instance that cannot open a key sealed elsewhere stops signing visibly and still verifies", async (t) => {
  const database = await sharedDatabase(t);
  const clock = manualClock();
  const unsealing = await start(t, { databaseUrl: database.url, clock });
  const sealing = await start(t, {
    databaseUrl: database.url,
    clock,
    env: { PROVISION_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64") },
  });
  const reader = await createClient(sealing.baseUrl, ["catalog:read"]);
  const newKid = await sealing.app.keys.rotate();
  clock.advance(PUBLISH_BEFORE_SIGNING_MS);
  const sealedToken = await readerToken(sealing, reader);
  t.is(kidOf(sealedToken), newKid);

  t.is(await productsStatus(unsealing, sealedToken), 200, "tokens signed elsewhere are still accepted");
  t.true((await kids(unsealing)).includes(newKid), "its JWKS names the new key");
  const refused = await fetch(`${unsealing.baseUrl}/auth/connect/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${reader.clientId}:${reader.clientSecret}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "grant_type=client_credentials",
  });
  t.is(refused.status, 503);
  t.regex(((await refused.json()) as { detail: string }).detail, /PROVISION_KEY_ENCRYPTION_KEY/);
  const ready = await fetch(`${unsealing.baseUrl}/readyz`);
  t.is(ready.status, 503, "taken out of a load balancer routing on /readyz");
  t.regex(((await ready.json()) as { detail: string }).detail, /PROVISION_KEY_ENCRYPTION_KEY/);
  t.is((await fetch(`${sealing.baseUrl}/readyz`)).status, 200);
  t.true(unsealing.logs.some((line) => line.includes("no signing key to sign with")));
});

/** What a verifier elsewhere does with a token at `now`: check it against its JWKS copy, as jose's helpers do. */
async function verifiesAgainst(keySet: JSONWebKeySet, token: string, now: Date): Promise<boolean> {
  try {
    await jwtVerify(token, createLocalJWKSet(keySet), { audience: "provision-api", typ: "at+jwt", currentDate: now });
    return true;
  } catch {
    return false;
  }
}

async function jwksOf(server: TestServer): Promise<JSONWebKeySet> {
  return (await fetch(`${server.baseUrl}/.well-known/jwks.json`)).json() as Promise<JSONWebKeySet>;
}

test("keys rotate run on a machine whose clock is 15 minutes behind leaves every token verifying", async (t) => {
  const database = await sharedDatabase(t);
  const clock = manualClock();
  const server = await start(t, { databaseUrl: database.url, clock });
  const reader = await createClient(server.baseUrl, ["catalog:read"]);
  clock.advance(60_000);
  const before = await readerToken(server, reader);
  const oldKid = kidOf(before);

  // The operator's command, run in-process with the clock of a machine 15 minutes behind the service's.
  const behind = { now: () => new Date(clock.now().getTime() - 15 * 60_000) };
  const output: string[] = [];
  const code = await runCli(["keys", "rotate"], {
    env: { DATABASE_URL: database.url },
    clock: behind,
    stdout: { write: (text: string) => output.push(text) },
    stderr: { write: (text: string) => output.push(text) },
  });
  t.is(code, 0, output.join(""));
  const newKid = JSON.parse(output.join("")).kid as string;

  // The service publishes the key on its own clock once it loads it, and signs with the old one meanwhile.
  clock.advance(KEY_REFRESH_MS + 1);
  const during = await readerToken(server, reader);
  t.is(kidOf(during), oldKid, "the new key does not sign before it has been published long enough");
  t.deepEqual(await kids(server), [oldKid, newKid].sort(), "both keys are published");
  clock.advance(PUBLISH_BEFORE_SIGNING_MS);
  const after = await readerToken(server, reader);
  t.is(kidOf(after), newKid);

  const keySet = await jwksOf(server);
  for (const [what, token] of [
    ["issued before the rotation", before],
    ["issued while the new key was being published", during],
    ["signed with the new key", after],
  ]) {
    t.is(await productsStatus(server, token), 200, what);
    t.true(await verifiesAgainst(keySet, token, clock.now()), `${what}: its kid is in the JWKS`);
  }
});

test("a verifier that caches the JWKS for its max-age never meets a token signed by a key missing from its copy", async (t) => {
  const database = await sharedDatabase(t);
  const clock = manualClock();
  const signer = await start(t, { databaseUrl: database.url, clock });
  const asked = await start(t, { databaseUrl: database.url, clock });
  const reader = await createClient(signer.baseUrl, ["catalog:read"]);
  const oldKid = kidOf(await readerToken(signer, reader));

  // The worst case: a key is published just after the instance the verifier asks loaded its key set, and the
  // verifier fetches that instance's JWKS just before the instance looks for new keys again.
  const newKid = await signer.app.keys.rotate();
  clock.advance(KEY_REFRESH_MS);
  const response = await fetch(`${asked.baseUrl}/.well-known/jwks.json`);
  const maxAge = Number(/(?:^|,)\s*max-age=(\d+)/.exec(response.headers.get("cache-control") ?? "")?.[1]);
  t.true(maxAge > 0, response.headers.get("cache-control") ?? "no Cache-Control");
  const cached = (await response.json()) as JSONWebKeySet;
  t.deepEqual(
    cached.keys.map((key) => key.kid),
    [oldKid],
    "the copy predates the new key",
  );

  // Up to the last moment the copy may be used, every instance signs with a key in it.
  clock.advance(maxAge * 1000 - 1);
  for (const server of [signer, asked]) {
    const token = await readerToken(server, reader);
    t.true(await verifiesAgainst(cached, token, clock.now()), `kid ${kidOf(token)} is in the cached copy`);
  }

  // Once the copy is stale the verifier fetches again; by the time the new key signs, every copy has it.
  const refreshed = await jwksOf(asked);
  t.true(refreshed.keys.some((key) => key.kid === newKid));
  clock.advance(PUBLISH_BEFORE_SIGNING_MS - KEY_REFRESH_MS - maxAge * 1000 + 1);
  const token = await readerToken(asked, reader);
  t.is(kidOf(token), newKid);
  t.true(await verifiesAgainst(refreshed, token, clock.now()));
});
