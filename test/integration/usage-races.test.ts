import anyTest, { type TestFn } from "ava";
import { counted, lockElsewhere, unlessStalled } from "../support/held-locks.js";
import {
  API_CALLS,
  CREDITS,
  creditsPath,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageEventsOf,
  usageItems,
} from "../support/metering.js";
import type { LicensedSession } from "../support/observability.js";
import { pollUntil } from "../support/poll.js";
import { type OwnRedis, startOwnRedis } from "../support/redis-server.js";
import { rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";
import { keepOutboxEvents } from "../support/webhooks.js";

// Three instances on one MySQL database and a Redis of this file's own (it is flushed mid-race).
const test = anyTest as TestFn<{ servers: TestServer[]; redis: OwnRedis; drop: () => Promise<void> }>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.redis = await startOwnRedis();
  t.context.servers = [];
  for (let index = 0; index < 3; index++) {
    t.context.servers.push(
      await startTestServer({ databaseUrl: database.url, env: { REDIS_URL: t.context.redis.url } }),
    );
  }
  await keepOutboxEvents(t.context.servers[0]);
});

test.after.always(async (t) => {
  for (const server of t.context.servers ?? []) await server.close();
  await t.context.redis?.stop();
  await t.context.drop?.();
});

async function recorded(server: TestServer, entitlementId: string) {
  const [row] = (await server.app.dataSource.query(
    "SELECT COUNT(*) AS n, COALESCE(SUM(amount), 0) AS total FROM usage_records WHERE entitlement_id = ?",
    [entitlementId],
  )) as { n: unknown; total: unknown }[];
  return { count: Number(row.n), totalMicro: Number(row.total) };
}

/** One session per instance, each used through its own instance. */
async function sessionsOnEveryInstance(servers: TestServer[], assets: Record<string, unknown>[]) {
  const entitlement = await meteredEntitlement(servers[0].baseUrl, assets);
  const sessions: LicensedSession[] = [];
  for (const server of servers) sessions.push(await meteredSession(server.baseUrl, entitlement));
  return { entitlement, sessions };
}

test.serial("64 pre-allocations racing on three instances grant exactly what the tiers allow", async (t) => {
  const { servers } = t.context;
  const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [API_CALLS]);
  const answers = await Promise.all(
    Array.from({ length: 64 }, (_, index) =>
      preallocate(servers[index % 3].baseUrl, sessions[index % 3], "api-calls", 2.5),
    ),
  );
  t.true(answers.every((answer) => answer.status === 200));
  t.is(answers.filter((answer) => answer.body.granted).length, 48);
  t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: 48, totalMicro: 120_000_000 });
});

test.serial(
  "Redis flushed in the middle of racing pre-allocations: counters rebuild from MySQL, still exact",
  async (t) => {
    const { servers, redis } = t.context;
    const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [CREDITS]);
    const race = (count: number) =>
      Array.from({ length: count }, (_, index) =>
        preallocate(servers[index % 3].baseUrl, sessions[index % 3], "credits", 0.75),
      );
    const first = race(40);
    await redis.flushAll();
    const second = race(40);
    await redis.flushAll();
    const answers = await Promise.all([...first, ...second, ...race(40)]);
    t.true(
      answers.every((answer) => answer.status === 200),
      JSON.stringify(answers.find((a) => a.status !== 200)?.body),
    );
    const granted = answers.filter((answer) => answer.body.granted).length;
    t.is(granted, 66, "50 credits hold 66 grants of 0.75");
    t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: 66, totalMicro: 49_500_000 });
    const after = await preallocate(servers[1].baseUrl, sessions[1], "credits", 0.5);
    t.like(after.body, { granted: true, currentValue: 50 });
  },
);

// A period's row held by another transaction (a rebuild summing a long period, a top-up, an operator's session)
// must hold up that period's grants only, not every asset's grants that the instance writes in groups.
test.serial("a period locked elsewhere holds up its own pre-allocations only", async (t) => {
  const [server] = t.context.servers;
  const held = await sessionsOnEveryInstance([server], [API_CALLS]);
  const free = await sessionsOnEveryInstance([server], [API_CALLS]);
  for (const { sessions } of [held, free]) {
    t.true((await preallocate(server.baseUrl, sessions[0], "api-calls", 1)).body.granted);
  }
  const lock = await lockElsewhere(server, "SELECT * FROM usage_periods WHERE entitlement_id = ? FOR UPDATE", [
    held.entitlement.entitlementId,
  ]);
  const heldGrants = counted(
    Array.from({ length: 20 }, () => () => preallocate(server.baseUrl, held.sessions[0], "api-calls", 1)),
  );
  try {
    const freeGrants = await unlessStalled(
      Promise.all(Array.from({ length: 40 }, () => preallocate(server.baseUrl, free.sessions[0], "api-calls", 1))),
    );
    t.not(freeGrants, "stalled", "the other asset's pre-allocations answered while the period was held");
    t.is(heldGrants.answered(), 0, "the held period's pre-allocations waited for it");
    if (freeGrants !== "stalled") t.true(freeGrants.every((answer) => answer.body.granted));
  } finally {
    await lock.release();
  }
  t.true((await heldGrants.all).every((answer) => answer.body.granted));
  t.deepEqual(await recorded(server, held.entitlement.entitlementId), { count: 21, totalMicro: 21_000_000 });
  t.deepEqual(await recorded(server, free.entitlement.entitlementId), { count: 41, totalMicro: 41_000_000 });
});

// Usage batches are transactions of their own: those waiting for a held period must not take every connection.
test.serial("usage batches of a period locked elsewhere hold up their own entitlement only", async (t) => {
  const [server] = t.context.servers;
  const held = await sessionsOnEveryInstance([server], [API_CALLS]);
  const free = await sessionsOnEveryInstance([server], [API_CALLS]);
  for (const { sessions } of [held, free]) {
    t.is((await sendUsage(server.baseUrl, sessions[0], usageItems("api-calls", [1]))).status, 200);
  }
  const lock = await lockElsewhere(server, "SELECT * FROM usage_periods WHERE entitlement_id = ? FOR UPDATE", [
    held.entitlement.entitlementId,
  ]);
  const heldBatches = counted(
    Array.from(
      { length: 20 },
      (_, index) => () => sendUsage(server.baseUrl, held.sessions[0], usageItems("api-calls", [1], 100 + index)),
    ),
  );
  try {
    const freeBatches = await unlessStalled(
      Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          sendUsage(server.baseUrl, free.sessions[0], usageItems("api-calls", [1], 100 + index)),
        ),
      ),
    );
    t.not(freeBatches, "stalled", "the other entitlement's batches answered while the period was held");
    t.is(heldBatches.answered(), 0, "the held period's batches waited for it");
    if (freeBatches !== "stalled") t.true(freeBatches.every((answer) => answer.status === 200));
  } finally {
    await lock.release();
  }
  t.true((await heldBatches.all).every((answer) => answer.status === 200));
  t.deepEqual(await recorded(server, held.entitlement.entitlementId), { count: 21, totalMicro: 21_000_000 });
  t.deepEqual(await recorded(server, free.entitlement.entitlementId), { count: 41, totalMicro: 41_000_000 });
});

test.serial("the same batch sent to three instances at once is counted once", async (t) => {
  const { servers } = t.context;
  const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [API_CALLS]);
  const batch = usageItems(
    "api-calls",
    Array.from({ length: 50 }, () => 0.5),
  );
  const answers = await Promise.all(
    Array.from({ length: 9 }, (_, index) => sendUsage(servers[index % 3].baseUrl, sessions[0], batch)),
  );
  t.true(
    answers.every((answer) => answer.status === 200),
    JSON.stringify(answers.map((a) => a.body)),
  );
  t.is(
    answers.reduce((sum, answer) => sum + answer.body.acceptedCount, 0),
    50,
  );
  t.is(
    answers.reduce((sum, answer) => sum + answer.body.duplicateCount, 0),
    8 * 50,
  );
  t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: 50, totalMicro: 25_000_000 });
});

test.serial("racing usage batches and pre-allocations on three instances never pass the Block tier", async (t) => {
  const { servers } = t.context;
  const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [API_CALLS]);
  const batches = Array.from({ length: 30 }, (_, index) =>
    sendUsage(servers[index % 3].baseUrl, sessions[index % 3], usageItems("api-calls", [1, 1, 1], 1000 + index * 3)),
  );
  const grants = Array.from({ length: 30 }, (_, index) =>
    preallocate(servers[(index + 1) % 3].baseUrl, sessions[(index + 1) % 3], "api-calls", 1.5),
  );
  const answers = await Promise.all([...batches, ...grants]);
  const accepted = answers.slice(0, 30).filter((answer) => answer.status === 200).length;
  const granted = answers.slice(30).filter((answer) => answer.body.granted).length;
  t.true(answers.slice(0, 30).every((answer) => answer.status === 200 || answer.status === 403));
  const totalMicro = accepted * 3_000_000 + granted * 1_500_000;
  t.true(totalMicro <= 120_000_000, `recorded ${totalMicro / 1e6}`);
  t.true(totalMicro > 120_000_000 - 3_000_000, `stopped at ${totalMicro / 1e6}: refusals only near the limit`);
  t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: accepted * 3 + granted, totalMicro });
});

test.serial("while Redis is down usage answers 503; once it is back the counters are rebuilt exactly", async (t) => {
  const { servers, redis } = t.context;
  const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [CREDITS]);
  t.like((await preallocate(servers[0].baseUrl, sessions[0], "credits", 20)).body, { granted: true });
  await redis.stop();
  const during = await preallocate(servers[1].baseUrl, sessions[1], "credits", 1);
  t.is(during.status, 503, JSON.stringify(during.body));
  t.is(during.body.type, "urn:provision:problem:counters-unavailable");
  t.is((await sendUsage(servers[2].baseUrl, sessions[2], usageItems("credits", [1]))).status, 503);
  await redis.restart();
  const after = await pollUntil(
    "Redis to be reachable again",
    async () => {
      const answer = await preallocate(servers[2].baseUrl, sessions[2], "credits", 30);
      return answer.status === 200 ? answer : undefined;
    },
    { timeoutMs: 15_000, intervalMs: 200 },
  );
  t.like(after.body, { granted: true, currentValue: 50 });
  t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: 2, totalMicro: 50_000_000 });
  // The tests after this one need every instance connected again, not only the one that answered.
  for (const server of servers) {
    await pollUntil(
      "every instance to reach Redis again",
      () =>
        server.app.coordinator.ping().then(
          () => true,
          () => undefined,
        ),
      {
        timeoutMs: 15_000,
        intervalMs: 100,
      },
    );
  }
});

test.serial("a top-up on one instance is seen by the others' balance events", async (t) => {
  const { servers } = t.context;
  const { entitlement, sessions } = await sessionsOnEveryInstance(servers, [CREDITS]);
  t.like((await preallocate(servers[0].baseUrl, sessions[0], "credits", 45)).body, { granted: true, tier: "Low" });
  const topUp = await rest(servers[1].baseUrl, "POST", creditsPath(entitlement.entitlementId, "credits"), {
    amount: 50,
  });
  t.like(topUp.body, { balanceStatus: 1, creditsLeft: 55 });
  t.like((await preallocate(servers[0].baseUrl, sessions[0], "credits", 40)).body, { granted: true, tier: "Low" });
  const events = await usageEventsOf(servers[2], entitlement.entitlementId);
  const statuses = events.map(({ data }) => [data.previousStatus, data.status]);
  t.deepEqual(statuses.sort(), [
    [1, 2],
    [1, 2],
    [2, 1],
  ]);
});

test.serial(
  "a batch over twelve assets whose counters were all lost is written after rebuilding them together",
  async (t) => {
    const { servers, redis } = t.context;
    const assets = Array.from({ length: 12 }, (_, index) => ({ ...API_CALLS, metricName: `metric-${index}` }));
    const { entitlement, sessions } = await sessionsOnEveryInstance(servers, assets);
    const batch = (firstId: number) =>
      assets.map((asset, index) => ({ transactionId: firstId + index, eventName: asset.metricName, eventData: "2" }));
    t.is((await sendUsage(servers[0].baseUrl, sessions[0], batch(1))).status, 200);
    await redis.flushAll();
    const after = await sendUsage(servers[1].baseUrl, sessions[1], batch(100));
    t.is(after.status, 200, JSON.stringify(after.body));
    t.deepEqual(await recorded(servers[0], entitlement.entitlementId), { count: 24, totalMicro: 48_000_000 });
    t.like((await preallocate(servers[2].baseUrl, sessions[2], "metric-11", 1)).body, { currentValue: 5 });
  },
);
