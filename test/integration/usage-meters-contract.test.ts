import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { createClient as createRedisClient } from "@redis/client";
import test from "ava";
import type { Coordinator } from "../../src/platform/coordinator.js";
import { createLogger } from "../../src/platform/logger.js";
import { MemoryCoordinator } from "../../src/platform/memory-coordinator.js";
import { RedisCoordinator } from "../../src/platform/redis-coordinator.js";
import { redisKeyOf } from "../../src/platform/redis-usage-meters.js";
import type { MeterKey } from "../../src/platform/usage-meters.js";
import { TEST_REDIS_URL } from "../support/test-server.js";

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

function newKey(): MeterKey {
  return { assetId: randomUUID(), periodStartMs: Date.UTC(2026, 10, 1) };
}

for (const [kind, coordinatorOf] of Object.entries(coordinators)) {
  test(`${kind}: a counter never loaded is missing, and reserving in it changes nothing`, async (t) => {
    const { meters } = coordinatorOf();
    const key = newKey();
    t.deepEqual(await meters.reserve({ key, amount: 5, mode: "sum" }), { kind: "missing" });
    await meters.load(key, 1, 0, null);
    t.like(await meters.reserve({ key, amount: 5, mode: "sum" }), { kind: "reserved", before: 0, after: 5 });
  });

  test(`${kind}: sum adds, peak keeps the highest, and the cap refuses without reserving`, async (t) => {
    const { meters } = coordinatorOf();
    const sum = newKey();
    await meters.load(sum, 3, 10, null);
    t.deepEqual(await meters.reserve({ key: sum, amount: 7, mode: "sum", cap: 20 }), {
      kind: "reserved",
      generation: 3,
      before: 10,
      after: 17,
      limit: null,
    });
    t.deepEqual(await meters.reserve({ key: sum, amount: 4, mode: "sum", cap: 20 }), {
      kind: "refused",
      generation: 3,
      value: 17,
      limit: null,
    });
    t.like(await meters.reserve({ key: sum, amount: 3, mode: "sum", cap: 20 }), { after: 20 });

    const peak = newKey();
    await meters.load(peak, 1, 0, null);
    t.like(await meters.reserve({ key: peak, amount: 8, mode: "peak" }), { before: 0, after: 8 });
    t.like(await meters.reserve({ key: peak, amount: 5, mode: "peak" }), { before: 8, after: 8 });
    t.like(await meters.reserve({ key: peak, amount: 9, mode: "peak", cap: 8 }), { kind: "refused", value: 8 });
  });

  test(`${kind}: a stored limit caps a balance; release gives back exactly what was taken`, async (t) => {
    const { meters } = coordinatorOf();
    const key = newKey();
    await meters.load(key, 2, 0, 1_000_000);
    t.like(await meters.reserve({ key, amount: 600_000, mode: "sum", cap: "stored" }), {
      kind: "reserved",
      limit: 1_000_000,
    });
    t.like(await meters.reserve({ key, amount: 500_000, mode: "sum", cap: "stored" }), { kind: "refused" });
    await meters.release(key, 2, 600_000, "sum");
    t.like(await meters.reserve({ key, amount: 1_000_000, mode: "sum", cap: "stored" }), {
      kind: "reserved",
      before: 0,
      after: 1_000_000,
    });
    await meters.release(key, 1, 1_000_000, "sum");
    t.like(
      await meters.reserve({ key, amount: 1, mode: "sum", cap: "stored" }),
      { kind: "refused" },
      "another generation's release is ignored",
    );
  });

  test(`${kind}: a generation asked for must be the counter's; a newer load replaces, an older one does not`, async (t) => {
    const { meters } = coordinatorOf();
    const key = newKey();
    await meters.load(key, 5, 100, null);
    t.deepEqual(await meters.reserve({ key, amount: 1, mode: "sum", generation: 4 }), { kind: "missing" });
    await meters.load(key, 4, 0, null);
    t.like(await meters.reserve({ key, amount: 1, mode: "sum", generation: 5 }), { before: 100, after: 101 });
    await meters.load(key, 6, 7, null);
    t.like(await meters.reserve({ key, amount: 1, mode: "sum" }), { generation: 6, before: 7 });
  });

  test(`${kind}: 64 racing reservations against a cap take exactly what it allows`, async (t) => {
    const { meters } = coordinatorOf();
    const key = newKey();
    await meters.load(key, 1, 0, null);
    const outcomes = await Promise.all(
      Array.from({ length: 64 }, () => meters.reserve({ key, amount: 3_000_000, mode: "sum", cap: 100_000_000 })),
    );
    t.is(outcomes.filter((outcome) => outcome.kind === "reserved").length, 33);
    t.like(await meters.reserve({ key, amount: 0, mode: "sum" }), { after: 99_000_000 });
  });

  test(`${kind}: amounts up to 2^53 micro-units stay exact`, async (t) => {
    const { meters } = coordinatorOf();
    const key = newKey();
    await meters.load(key, 1, 2 ** 53 - 10, null);
    t.like(await meters.reserve({ key, amount: 9, mode: "sum" }), { after: 2 ** 53 - 1 });
  });
}

test("redis: a counter lost from Redis answers missing, and the scripts load again after SCRIPT FLUSH", async (t) => {
  const { meters } = coordinators.redis();
  const admin = createRedisClient({ url: TEST_REDIS_URL });
  await admin.connect();
  try {
    const key = newKey();
    await meters.load(key, 1, 5, null);
    await admin.scriptFlush();
    t.like(await meters.reserve({ key, amount: 1, mode: "sum" }), { kind: "reserved", after: 6 });
    await admin.del(redisKeyOf(key));
    t.deepEqual(await meters.reserve({ key, amount: 1, mode: "sum" }), { kind: "missing" });
    t.true((await admin.pTTL(redisKeyOf(newKey()))) < 0);
  } finally {
    await admin.close();
  }
});
