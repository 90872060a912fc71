import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { ownLoopbackAddress, postJsonFrom, type ResponseFrom } from "../support/from-address.js";
import { ACTIVATE, entitlementWithCode } from "../support/licensing.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

// Activations presenting a code are counted per source address before the code is looked up, and only wrong
// guesses keep their point: ACTIVATION_RATE_LIMIT_PER_ADDRESS wrong codes a minute, across instances (Redis).
// Each test sends from a loopback address of its own, so other test files' activations never share its counts.

const LIMIT = 5;
const ENV = { ACTIVATION_RATE_LIMIT_PER_ADDRESS: String(LIMIT) };

interface Context {
  first: TestServer;
  second: TestServer;
  embedded: TestServer;
  folder: string;
  dropDatabase(): Promise<void>;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.dropDatabase = database.drop;
  t.context.first = await startTestServer({ databaseUrl: database.url, env: ENV });
  t.context.second = await startTestServer({ databaseUrl: database.url, env: ENV });
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-activation-guesses-"));
  t.context.embedded = await startTestServer({
    embedded: { file: path.join(t.context.folder, "db.sqlite") },
    env: ENV,
  });
});

test.after.always(async (t) => {
  for (const server of [t.context.first, t.context.second, t.context.embedded]) await server?.close();
  await t.context.dropDatabase?.();
  if (t.context.folder) fs.rmSync(t.context.folder, { recursive: true, force: true });
});

let devices = 0;
function activateFrom(server: TestServer, activationCode: string, address: string): Promise<ResponseFrom> {
  devices++;
  return postJsonFrom(server.baseUrl, ACTIVATE, { activationCode, fingerprint: `guess-${devices}` }, address);
}

const wrongCode = () => `NOPE-${Math.random().toString(36).slice(2, 12)}`;

function assertLimited(t: ExecutionContext, response: ResponseFrom, what: string) {
  t.is(response.status, 429, `${what}: ${JSON.stringify(response.body)}`);
  t.is(response.body.type, "urn:provision:problem:rate-limited", what);
  const retryAfter = Number(response.headers["retry-after"]);
  t.true(retryAfter >= 1 && retryAfter <= 60, `${what}: Retry-After ${response.headers["retry-after"]}`);
}

test("wrong codes from one address are limited across instances; then even a right code waits; others are not", async (t) => {
  const { first, second } = t.context;
  const { code } = await entitlementWithCode(first.baseUrl, {});
  const address = ownLoopbackAddress();
  for (let attempt = 0; attempt < LIMIT; attempt++) {
    const answer = await activateFrom(attempt % 2 === 0 ? first : second, wrongCode(), address);
    t.is(answer.status, 404, `wrong code ${attempt + 1}: ${JSON.stringify(answer.body)}`);
  }
  assertLimited(t, await activateFrom(first, wrongCode(), address), "one more wrong code");
  assertLimited(t, await activateFrom(second, code, address), "the right code from that address");
  t.is((await activateFrom(second, code, ownLoopbackAddress())).status, 200, "another address");
});

test("wrong codes racing at once across instances: exactly the limit of them are looked up", async (t) => {
  const { first, second } = t.context;
  const address = ownLoopbackAddress();
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, index) => activateFrom(index % 2 === 0 ? first : second, wrongCode(), address)),
  );
  const statuses = answers.map((answer) => answer.status);
  t.is(statuses.filter((status) => status === 404).length, LIMIT, statuses.join(" "));
  t.is(statuses.filter((status) => status === 429).length, 40 - LIMIT, statuses.join(" "));
});

test("activations with a right code, refused or not, use none of the limit", async (t) => {
  const { first, second } = t.context;
  const { code } = await entitlementWithCode(first.baseUrl, {});
  const { code: oneSeat } = await entitlementWithCode(first.baseUrl, { claimBasedActivation: { numberOfSeats: 1 } });
  const address = ownLoopbackAddress();
  t.is((await activateFrom(first, oneSeat, address)).status, 200);
  for (let round = 0; round < 2 * LIMIT; round++) {
    t.is((await activateFrom(round % 2 === 0 ? first : second, code, address)).status, 200, `activation ${round + 1}`);
    const full = await activateFrom(second, oneSeat, address);
    t.is(full.status, 409, `no seat left, round ${round + 1}: ${JSON.stringify(full.body)}`);
  }
  for (let attempt = 0; attempt < LIMIT; attempt++) {
    t.is((await activateFrom(first, wrongCode(), address)).status, 404, `wrong code ${attempt + 1}`);
  }
  assertLimited(t, await activateFrom(first, wrongCode(), address), "past the limit");
});

test("embedded: the in-process coordinator counts wrong codes the same way", async (t) => {
  const { embedded } = t.context;
  const address = ownLoopbackAddress();
  for (let attempt = 0; attempt < LIMIT; attempt++) {
    t.is((await activateFrom(embedded, wrongCode(), address)).status, 404, `wrong code ${attempt + 1}`);
  }
  assertLimited(t, await activateFrom(embedded, wrongCode(), address), "past the limit");
});
