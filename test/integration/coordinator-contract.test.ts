import { randomUUID } from "node:crypto";
import net from "node:net";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { createClient as createRedisClient } from "@redis/client";
import test, { type ExecutionContext } from "ava";
import { type Coordinator, isRateLimited, type RateLimiter } from "../../src/platform/coordinator.js";
import { createLogger } from "../../src/platform/logger.js";
import { MemoryCoordinator } from "../../src/platform/memory-coordinator.js";
import { RedisCoordinator } from "../../src/platform/redis-coordinator.js";
import { TEST_REDIS_URL } from "../support/test-server.js";

const WINDOW_SECONDS = 60;

const discardLogs = new Writable({ write: (_chunk, _encoding, callback) => callback() });
let redis: RedisCoordinator | undefined;

test.before(async () => {
  redis = await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs));
});

test.after.always(async () => {
  await redis?.close();
});

const coordinators: Record<"redis" | "memory", () => Coordinator> = {
  redis: () => {
    if (!redis) throw new Error("redis did not connect");
    return redis;
  },
  memory: () => new MemoryCoordinator(),
};

/** A limiter name of this test's own: every test file shares one Redis. */
function name(t: ExecutionContext): string {
  return `contract:${t.title.slice(0, 24).replace(/\W+/g, "-")}:${randomUUID()}`;
}

/** The consumed points of one consume, whether it was allowed or refused. */
async function consume(
  limiter: RateLimiter,
  key: string,
): Promise<{ allowed: boolean; count: number; msLeft: number }> {
  try {
    const state = await limiter.consume(key);
    return { allowed: true, count: state.consumedPoints, msLeft: state.msBeforeNext };
  } catch (reason) {
    if (!isRateLimited(reason)) throw reason;
    return { allowed: false, count: reason.consumedPoints, msLeft: reason.msBeforeNext };
  }
}

for (const kind of ["redis", "memory"] as const) {
  const make = coordinators[kind];

  test(`${kind}: points within a window are counted one by one, allowed up to the limit and refused beyond`, async (t) => {
    const coordinator = make();
    t.is(coordinator.kind, kind);
    const limiter = coordinator.rateLimiter({ name: name(t), points: 3, durationSeconds: WINDOW_SECONDS });
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await consume(limiter, "key"));
    t.deepEqual(
      decisions.map(({ allowed, count }) => ({ allowed, count })),
      [
        { allowed: true, count: 1 },
        { allowed: true, count: 2 },
        { allowed: true, count: 3 },
        { allowed: false, count: 4 },
        { allowed: false, count: 5 },
      ],
    );
  });

  test(`${kind}: the time left is more than zero and at most the window, in milliseconds`, async (t) => {
    const limiter = make().rateLimiter({ name: name(t), points: 2, durationSeconds: WINDOW_SECONDS });
    for (let i = 0; i < 4; i++) {
      const { msLeft } = await consume(limiter, "key");
      t.true(msLeft > (WINDOW_SECONDS - 5) * 1000 && msLeft <= WINDOW_SECONDS * 1000, `msLeft ${msLeft}`);
    }
  });

  test(`${kind}: keys, and limiters of different names, are counted independently`, async (t) => {
    const coordinator = make();
    const limiter = coordinator.rateLimiter({ name: name(t), points: 2, durationSeconds: WINDOW_SECONDS });
    const other = coordinator.rateLimiter({ name: name(t), points: 2, durationSeconds: WINDOW_SECONDS });
    for (let i = 0; i < 3; i++) await consume(limiter, "first");
    t.false((await consume(limiter, "first")).allowed);
    t.like(await consume(limiter, "second"), { allowed: true, count: 1 });
    t.like(await consume(other, "first"), { allowed: true, count: 1 });
  });

  test(`${kind}: one name is one limiter, and asking for it with other limits is an error`, async (t) => {
    const coordinator = make();
    const options = { name: name(t), points: 2, durationSeconds: WINDOW_SECONDS };
    const limiter = coordinator.rateLimiter(options);
    await consume(limiter, "key");
    t.like(await consume(coordinator.rateLimiter({ ...options }), "key"), { count: 2 });
    t.throws(() => coordinator.rateLimiter({ ...options, points: 3 }), { message: /other points/ });
  });

  test(`${kind}: a new window starts when the old one ends, however many consumes it refused`, async (t) => {
    const limiter = make().rateLimiter({ name: name(t), points: 2, durationSeconds: 1 });
    const startedAt = Date.now();
    for (let i = 0; i < 3; i++) await consume(limiter, "key");
    // Bounded polling: the window ends on the store's own clock. Every probe is a refused consume itself; if
    // refused consumes extended the window, probing every 50 ms would keep it open and this would fail.
    let opening = await consume(limiter, "key");
    for (let probe = 0; probe < 60 && opening.count !== 1; probe++) {
      await delay(50);
      opening = await consume(limiter, "key");
    }
    t.like(opening, { allowed: true, count: 1 });
    t.true(Date.now() - startedAt >= 950, `the window ended after ${Date.now() - startedAt} ms`);
    t.like(await consume(limiter, "key"), { allowed: true, count: 2 });
  });

  test(`${kind}: get reads a key without consuming, and a reward gives a point back`, async (t) => {
    const limiter = make().rateLimiter({ name: name(t), points: 2, durationSeconds: WINDOW_SECONDS });
    t.is(await limiter.get("key"), null);
    await consume(limiter, "key");
    await consume(limiter, "key");
    t.is((await limiter.get("key"))?.consumedPoints, 2);
    t.is((await limiter.get("key"))?.consumedPoints, 2, "reading does not consume");
    t.false((await consume(limiter, "key")).allowed);
    await limiter.reward("key");
    await limiter.reward("key");
    t.like(await consume(limiter, "key"), { allowed: true, count: 2 });
  });

  test(`${kind}: 100 concurrent consumes are each counted exactly once`, async (t) => {
    const limiter = make().rateLimiter({ name: name(t), points: 60, durationSeconds: WINDOW_SECONDS });
    const decisions = await Promise.all(Array.from({ length: 100 }, () => consume(limiter, "key")));
    t.deepEqual(
      decisions.map((decision) => decision.count).sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    t.is(decisions.filter((decision) => decision.allowed).length, 60);
    t.true(decisions.every((decision) => decision.allowed === decision.count <= 60));
  });
}

test("redis: two coordinators on one Redis share a limiter's counts, under Provision's key prefix", async (t) => {
  const other = await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs));
  t.teardown(() => other.close());
  const options = { name: name(t), points: 3, durationSeconds: WINDOW_SECONDS };
  const [first, second] = [coordinators.redis().rateLimiter(options), other.rateLimiter(options)];
  const counts = [];
  for (let i = 0; i < 4; i++) counts.push((await consume(i % 2 === 0 ? first : second, "key")).count);
  t.deepEqual(counts, [1, 2, 3, 4]);
  const client = createRedisClient({ url: TEST_REDIS_URL });
  await client.connect();
  t.teardown(() => client.close());
  t.is(await client.get(`provision:rate:${options.name}:key`), "4");
});

test("redis: an unreachable Redis fails a consume with an Error, not a refusal", async (t) => {
  const coordinator = await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs));
  const limiter = coordinator.rateLimiter({ name: name(t), points: 3, durationSeconds: WINDOW_SECONDS });
  await coordinator.close();
  const reason = await limiter.consume("key").catch((error: unknown) => error);
  t.true(reason instanceof Error, String(reason));
  t.false(isRateLimited(reason));
});

test("redis: a Redis that stops answering fails a consume with an Error instead of leaving it waiting", async (t) => {
  const upstream = new URL(TEST_REDIS_URL);
  const sockets: net.Socket[] = [];
  let frozen = false;
  const proxy = net.createServer((client) => {
    const server = net.connect(Number(upstream.port || 6379), upstream.hostname);
    sockets.push(client, server);
    client.on("data", (chunk) => frozen || server.write(chunk));
    server.pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    proxy.close();
  });
  const url = `redis://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
  const coordinator = await RedisCoordinator.connect(url, createLogger("silent", discardLogs));
  t.teardown(() => coordinator.close().catch(() => undefined));
  const limiter = coordinator.rateLimiter({ name: name(t), points: 3, durationSeconds: WINDOW_SECONDS });
  t.like(await consume(limiter, "key"), { allowed: true, count: 1 });
  frozen = true;
  const reason = await limiter.consume("key").catch((error: unknown) => error);
  t.true(reason instanceof Error, String(reason));
  t.false(isRateLimited(reason));
});

/** The command a MONITOR line shows (its first quoted word), lowercased. */
function commandOf(line: string): string {
  return (
    line
      .split(" ")
      .find((word) => word.startsWith('"'))
      ?.toLowerCase() ?? ""
  );
}

test.serial(
  "redis: a limiter sends its script by EVALSHA, and its text only when Redis no longer holds it",
  async (t) => {
    const monitor = createRedisClient({ url: TEST_REDIS_URL });
    await monitor.connect();
    t.teardown(() => monitor.destroy());
    const limiterName = name(t);
    const sent: string[] = [];
    await monitor.monitor((line) => {
      if (line.includes(limiterName)) sent.push(commandOf(line));
    });
    const admin = await monitor.duplicate().connect();
    await admin.scriptFlush();
    await admin.destroy();
    const limiter = coordinators.redis().rateLimiter({ name: limiterName, points: 5, durationSeconds: WINDOW_SECONDS });
    const counts = [];
    for (let call = 0; call < 3; call++) counts.push((await consume(limiter, "key")).count);
    t.deepEqual(counts, [1, 2, 3], "counted once each, the first after SCRIPT FLUSH too");
    const times = (command: string) => sent.filter((seen) => seen === `"${command}"`).length;
    for (let wait = 0; times("evalsha") < 3 && wait < 50; wait++) await delay(20);
    t.is(times("evalsha"), 3, sent.join(" "));
    t.true(times("eval") <= 1, `the text goes once at most: ${sent.join(" ")}`);
  },
);
