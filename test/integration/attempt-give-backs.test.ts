import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import test, { type ExecutionContext } from "ava";
import { countAttempt, RateLimited, sendHeldGiveBacks } from "../../src/platform/attempt-limits.js";
import type { Coordinator, RateLimiter } from "../../src/platform/coordinator.js";
import { createLogger } from "../../src/platform/logger.js";
import { MemoryCoordinator } from "../../src/platform/memory-coordinator.js";
import { RedisCoordinator } from "../../src/platform/redis-coordinator.js";
import { TEST_REDIS_URL } from "../support/test-server.js";

const discardLogs = new Writable({ write: (_chunk, _encoding, callback) => callback() });
const noWarning = (error: unknown) => {
  throw error;
};

/** The limiter, and the points of each reward command sent through it. */
function watchedLimiter(coordinator: Coordinator, points: number, durationSeconds = 60) {
  const limiter = coordinator.rateLimiter({ name: `give-backs:${randomUUID()}`, points, durationSeconds });
  const rewards: number[] = [];
  const reward = limiter.reward.bind(limiter);
  (limiter as RateLimiter).reward = (key, given) => {
    rewards.push(given ?? 1);
    return reward(key, given);
  };
  return { limiter, rewards };
}

async function coordinatorOf(kind: "redis" | "memory", t: ExecutionContext): Promise<Coordinator> {
  if (kind === "memory") return new MemoryCoordinator();
  const redis = await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs));
  t.teardown(() => redis.close());
  return redis;
}

const consumed = async (limiter: RateLimiter, subject: string) => (await limiter.get(subject))?.consumedPoints ?? 0;

for (const kind of ["redis", "memory"] as const) {
  test(`${kind}: points given back are held, then sent in one command per subject`, async (t) => {
    const { limiter, rewards } = watchedLimiter(await coordinatorOf(kind, t), 50);
    const attempts = await Promise.all(
      Array.from({ length: 30 }, (_, index) => countAttempt(limiter, index < 20 ? "a" : "b", noWarning)),
    );
    t.is(await consumed(limiter, "a"), 20);
    for (const attempt of attempts) attempt.succeeded();
    t.deepEqual(rewards, [], "held, not sent at once");
    await sendHeldGiveBacks(limiter);
    t.deepEqual(rewards.sort(), [10, 20]);
    t.is(await consumed(limiter, "a"), 0);
    t.is(await consumed(limiter, "b"), 0);
  });

  test(`${kind}: the subject's next attempt carries the points held for it, in its own command`, async (t) => {
    const { limiter, rewards } = watchedLimiter(await coordinatorOf(kind, t), 50);
    const attempts = await Promise.all(Array.from({ length: 20 }, () => countAttempt(limiter, "a", noWarning)));
    for (const attempt of attempts) attempt.succeeded();
    await countAttempt(limiter, "a", noWarning);
    t.is(await consumed(limiter, "a"), 1, "20 counted, 20 given back, 1 counted");
    await sendHeldGiveBacks(limiter);
    t.deepEqual(rewards, [], "nothing was left to send alone");
  });

  test(`${kind}: a point no attempt carries is sent alone when its hold ends`, async (t) => {
    const { limiter, rewards } = watchedLimiter(await coordinatorOf(kind, t), 50);
    (await countAttempt(limiter, "a", noWarning)).succeeded();
    for (let waited = 0; rewards.length === 0 && waited < 2000; waited += 20) await sleep(20);
    t.deepEqual(rewards, [1]);
    t.is(await consumed(limiter, "a"), 0);
  });

  test(`${kind}: with points held, a burst of failing attempts still gets exactly the limit checked`, async (t) => {
    const { limiter } = watchedLimiter(await coordinatorOf(kind, t), 5);
    const good = await Promise.all(Array.from({ length: 5 }, () => countAttempt(limiter, "a", noWarning)));
    for (const attempt of good) attempt.succeeded();
    const burst = await Promise.allSettled(Array.from({ length: 10 }, () => countAttempt(limiter, "a", noWarning)));
    const refused = burst.filter((outcome) => outcome.status === "rejected");
    t.is(burst.length - refused.length, 5, "the 5 points given back make room for 5");
    t.true(refused.every((outcome) => (outcome as PromiseRejectedResult).reason instanceof RateLimited));
    t.is(await consumed(limiter, "a"), 10);
  });

  test(`${kind}: a point is not given back so near the window's end that it could land in the next`, async (t) => {
    const { limiter, rewards } = watchedLimiter(await coordinatorOf(kind, t), 5, 2);
    (await countAttempt(limiter, "a", noWarning)).succeeded();
    await sendHeldGiveBacks(limiter);
    t.deepEqual(rewards, []);
    t.is(await consumed(limiter, "a"), 1);
  });
}
