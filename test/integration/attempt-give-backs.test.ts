import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import test from "ava";
import { countAttempt } from "../../src/platform/attempt-limits.js";
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
function watchedLimiter(coordinator: Coordinator, points: number) {
  const limiter = coordinator.rateLimiter({ name: `give-backs:${randomUUID()}`, points, durationSeconds: 60 });
  const rewards: number[] = [];
  const reward = limiter.reward.bind(limiter);
  (limiter as RateLimiter).reward = (key, given) => {
    rewards.push(given ?? 1);
    return reward(key, given);
  };
  return { limiter, rewards };
}

for (const kind of ["redis", "memory"] as const) {
  test(`${kind}: successes of one turn give their points back in one command per subject`, async (t) => {
    const redis =
      kind === "redis" ? await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs)) : null;
    t.teardown(() => redis?.close());
    const { limiter, rewards } = watchedLimiter(redis ?? new MemoryCoordinator(), 50);
    const attempts = await Promise.all(
      Array.from({ length: 30 }, (_, index) => countAttempt(limiter, index < 20 ? "a" : "b", noWarning)),
    );
    t.is((await limiter.get("a"))?.consumedPoints, 20);
    await Promise.all(attempts.map((attempt) => attempt.succeeded()));
    t.deepEqual(rewards.sort(), [10, 20]);
    t.is((await limiter.get("a"))?.consumedPoints, 0);
    t.is((await limiter.get("b"))?.consumedPoints, 0);

    // A later turn's success is a command of its own.
    const later = await countAttempt(limiter, "a", noWarning);
    await later.succeeded();
    t.deepEqual(rewards.sort(), [1, 10, 20]);
    t.is((await limiter.get("a"))?.consumedPoints, 0);
  });
}
