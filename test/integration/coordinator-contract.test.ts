import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import test, { type ExecutionContext } from "ava";
import type { Coordinator, RateDecision } from "../../src/platform/coordinator.js";
import { createLogger } from "../../src/platform/logger.js";
import { MemoryCoordinator } from "../../src/platform/memory-coordinator.js";
import { RedisCoordinator } from "../../src/platform/redis-coordinator.js";
import { manualClock } from "../support/manual-clock.js";
import { TEST_REDIS_URL } from "../support/test-server.js";

/**
 * One implementation under the contract: a coordinator, its notion of now, and a way to hit a key until its
 * window has ended (the memory coordinator's injected clock moves; Redis's own clock has to run).
 */
interface Subject {
  coordinator: Coordinator;
  now(): number;
  /** Keeps hitting `key` until a decision opens a new window, and answers that decision. */
  hitUntilNewWindow(key: string, limit: number, windowMs: number): Promise<RateDecision>;
}

const WINDOW_MS = 60_000;
const SHORT_WINDOW_MS = 300;

const discardLogs = new Writable({ write: (_chunk, _encoding, callback) => callback() });
let redis: RedisCoordinator | undefined;

test.before(async () => {
  redis = await RedisCoordinator.connect(TEST_REDIS_URL, createLogger("silent", discardLogs));
});

test.after.always(async () => {
  await redis?.close();
});

const subjects: Record<"redis" | "memory", () => Subject> = {
  redis: () => {
    if (!redis) throw new Error("redis did not connect");
    const coordinator = redis;
    return {
      coordinator,
      now: () => Date.now(),
      async hitUntilNewWindow(key, limit, windowMs) {
        // Bounded polling: Redis ends the window on its own clock. Every probe is a refused hit itself.
        // If refused hits extended the window, probing every 20 ms would keep it open and this would throw.
        for (let attempt = 0; attempt < 250; attempt++) {
          const decision = await coordinator.hit(key, limit, windowMs);
          if (decision.count === 1) return decision;
          await delay(20);
        }
        throw new Error(`the window of ${key} did not end within 5 s`);
      },
    };
  },
  memory: () => {
    const clock = manualClock();
    const coordinator = new MemoryCoordinator(clock);
    return {
      coordinator,
      now: () => clock.now().getTime(),
      async hitUntilNewWindow(key, limit, windowMs) {
        for (let step = 0; step < windowMs / 50 + 1; step++) {
          const decision = await coordinator.hit(key, limit, windowMs);
          if (decision.count === 1) return decision;
          clock.advance(50);
        }
        throw new Error(`the window of ${key} did not end`);
      },
    };
  },
};

function key(t: ExecutionContext): string {
  return `contract:${t.title.slice(0, 24).replace(/\W+/g, "-")}:${randomUUID()}`;
}

for (const kind of ["redis", "memory"] as const) {
  const make = subjects[kind];
  test(`${kind}: hits within a window are counted one by one`, async (t) => {
    const { coordinator } = make();
    t.is(coordinator.kind, kind);
    const name = key(t);
    const counts = [];
    for (let i = 0; i < 4; i++) counts.push((await coordinator.hit(name, 10, WINDOW_MS)).count);
    t.deepEqual(counts, [1, 2, 3, 4]);
  });

  test(`${kind}: hits are allowed up to the limit and refused beyond it`, async (t) => {
    const { coordinator } = make();
    const name = key(t);
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await coordinator.hit(name, 3, WINDOW_MS));
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

  test(`${kind}: retryAfterMs is more than zero and at most the window`, async (t) => {
    const { coordinator } = make();
    const name = key(t);
    for (let i = 0; i < 4; i++) {
      const { retryAfterMs } = await coordinator.hit(name, 2, WINDOW_MS);
      t.true(retryAfterMs > 0 && retryAfterMs <= WINDOW_MS, `retryAfterMs ${retryAfterMs}`);
    }
    // A window of seconds is not mistaken for one of milliseconds (or the other way round).
    const { retryAfterMs } = await coordinator.hit(name, 2, WINDOW_MS);
    t.true(retryAfterMs > WINDOW_MS - 5_000, `retryAfterMs ${retryAfterMs}`);
  });

  test(`${kind}: keys are counted independently`, async (t) => {
    const { coordinator } = make();
    const first = key(t);
    const second = key(t);
    for (let i = 0; i < 3; i++) await coordinator.hit(first, 2, WINDOW_MS);
    t.false((await coordinator.hit(first, 2, WINDOW_MS)).allowed);
    t.like(await coordinator.hit(second, 2, WINDOW_MS), { allowed: true, count: 1 });
  });

  test(`${kind}: a new window starts when the old one ends, however many hits it refused`, async (t) => {
    const subject = make();
    const name = key(t);
    const startedAt = subject.now();
    for (let i = 0; i < 3; i++) await subject.coordinator.hit(name, 2, SHORT_WINDOW_MS);
    t.false((await subject.coordinator.hit(name, 2, SHORT_WINDOW_MS)).allowed);
    const opening = await subject.hitUntilNewWindow(name, 2, SHORT_WINDOW_MS);
    const elapsedMs = subject.now() - startedAt;
    t.like(opening, { allowed: true, count: 1 });
    t.true(elapsedMs >= SHORT_WINDOW_MS - 2, `the window ended after ${elapsedMs} ms`);
    t.like(await subject.coordinator.hit(name, 2, SHORT_WINDOW_MS), { allowed: true, count: 2 });
  });

  test(`${kind}: peek reads a window without counting a hit`, async (t) => {
    const { coordinator } = make();
    const name = key(t);
    t.deepEqual(await coordinator.peek(name), { count: 0, retryAfterMs: 0 });
    await coordinator.hit(name, 5, WINDOW_MS);
    await coordinator.hit(name, 5, WINDOW_MS);
    const first = await coordinator.peek(name);
    const second = await coordinator.peek(name);
    t.is(first.count, 2);
    t.is(second.count, 2, "peeking does not count");
    t.true(first.retryAfterMs > 0 && first.retryAfterMs <= WINDOW_MS);
  });

  test(`${kind}: 100 concurrent hits are each counted exactly once`, async (t) => {
    const { coordinator } = make();
    const name = key(t);
    const decisions = await Promise.all(Array.from({ length: 100 }, () => coordinator.hit(name, 60, WINDOW_MS)));
    t.deepEqual(
      decisions.map((decision) => decision.count).sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    t.is(decisions.filter((decision) => decision.allowed).length, 60);
    t.true(decisions.every((decision) => decision.allowed === decision.count <= 60));
  });
}

test("memory: the window runs from its first hit and refused hits do not extend it", async (t) => {
  const clock = manualClock();
  const coordinator = new MemoryCoordinator(clock);
  const name = key(t);
  t.is((await coordinator.hit(name, 1, 1000)).retryAfterMs, 1000);
  clock.advance(400);
  t.like(await coordinator.hit(name, 1, 1000), { allowed: false, retryAfterMs: 600 });
  clock.advance(500);
  t.like(await coordinator.hit(name, 1, 1000), { allowed: false, retryAfterMs: 100 });
  clock.advance(100);
  t.like(await coordinator.hit(name, 1, 1000), { allowed: true, count: 1, retryAfterMs: 1000 });
});
