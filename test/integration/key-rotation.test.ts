import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { decodeProtectedHeader, type JSONWebKeySet } from "jose";
import mysql from "mysql2/promise";
import { PUBLISH_BEFORE_SIGNING_MS } from "../../src/auth/key-store.js";
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
