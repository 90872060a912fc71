import anyTest, { type TestFn } from "ava";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionCall, sessionIdOf } from "../support/licensing.js";
import { pollUntil } from "../support/poll.js";
import { rest } from "../support/rest.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { createTestDatabase, startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";

// An instance cut off from Redis (not from MySQL) still tells the others of what it changes: the invalidations
// it cannot publish go through MySQL's cache_invalidations, which every instance reads each second. Without it,
// the others served their cached copies until they expired (30 s): an ended session checked in as Active there.

interface Context {
  /** Reaches Redis directly. */
  connected: TestServer;
  /** Reaches Redis through `proxy`, which the test cuts. */
  cutOff: TestServer;
  proxy: TcpProxy;
  drop(): Promise<void>;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  const redis = new URL(TEST_REDIS_URL);
  t.context.proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  t.context.connected = await startTestServer({ databaseUrl: database.url });
  t.context.cutOff = await startTestServer({
    databaseUrl: database.url,
    env: { REDIS_URL: `redis://127.0.0.1:${t.context.proxy.port}` },
  });
});

test.after.always(async (t) => {
  t.context.proxy?.resume();
  await t.context.connected?.close();
  await t.context.cutOff?.close();
  await t.context.proxy?.close();
  await t.context.drop?.();
});

test.serial(
  "a session ended through an instance cut off from Redis is refused by the others within seconds",
  async (t) => {
    const { connected, cutOff, proxy } = t.context;
    const policy = { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: true, leaseTime: "00:10:00" } };
    const { entitlementId, code } = await entitlementWithCode(connected.baseUrl, policy);
    const first = await activate(connected.baseUrl, { activationCode: code, fingerprint: "laptop" });
    t.is(first.status, 200);
    const token = first.body.licenseToken as string;
    // A bus keeps nothing until its subscriptions stand, about a second after it connected.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    for (let round = 0; round < 2; round++) {
      t.is((await sessionCall(connected.baseUrl, token, "check-in")).status, 200, "kept in the connected instance");
    }

    proxy.stall();
    const ended = await rest(
      cutOff.baseUrl,
      "DELETE",
      `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(token)}`,
    );
    t.is(ended.status, 200, JSON.stringify(ended.body));
    const endedAt = Date.now();
    await pollUntil(
      "the connected instance to refuse the ended session",
      async () => ((await sessionCall(connected.baseUrl, token, "check-in")).status === 401 ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    t.log(`refused ${Date.now() - endedAt} ms after the end`);
    t.true(
      cutOff.logs.some((line) => line.includes("could not tell other instances")) === false,
      "the change was told through MySQL: no warning that it could not be",
    );
  },
);
