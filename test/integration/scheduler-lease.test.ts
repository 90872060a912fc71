import anyTest, { type TestFn } from "ava";
import { createLogger } from "../../src/platform/logger.js";
import { Scheduler } from "../../src/platform/scheduler.js";
import { SchedulerLease } from "../../src/platform/scheduler-lease.js";
import { manualClock } from "../support/manual-clock.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

const test = anyTest as TestFn<BothDatabases>;

const TTL_MS = 30_000;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
});

test.after.always(async (t) => {
  await t.context.close?.();
});

for (const name of ["MySQL", "SQLite"] as const) {
  test(`${name}: a round that outlives its lease stops once another instance has taken it`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const clock = manualClock(Date.now());
    const lease = `test-lease-${name}-${Math.random().toString(36).slice(2)}`;
    const other = new SchedulerLease(dataSource, clock, lease, TTL_MS);
    const ran: string[] = [];
    const scheduler = new Scheduler({
      lease: new SchedulerLease(dataSource, clock, lease, TTL_MS),
      intervalMs: 60_000,
      clock,
      logger: createLogger("silent"),
      jobs: [
        {
          name: "slow",
          async run() {
            ran.push("slow");
            clock.advance(TTL_MS + 1000);
            t.true(await other.acquire(), "the lease expired during the job: another instance takes it");
          },
        },
        { name: "next", run: async () => void ran.push("next") },
      ],
    });
    await scheduler.tick();
    t.deepEqual(ran, ["slow"], "the job after the takeover does not run here");
    await scheduler.close();
  });

  test(`${name}: a round renews its lease before each job, so a long round keeps it`, async (t) => {
    const { dataSource } = t.context.servers[name].app;
    const clock = manualClock(Date.now());
    const lease = `test-lease-${name}-${Math.random().toString(36).slice(2)}`;
    const other = new SchedulerLease(dataSource, clock, lease, TTL_MS);
    const ran: string[] = [];
    const step = (label: string) => ({
      name: label,
      async run() {
        ran.push(label);
        clock.advance(TTL_MS - 1000);
      },
    });
    const scheduler = new Scheduler({
      lease: new SchedulerLease(dataSource, clock, lease, TTL_MS),
      intervalMs: 60_000,
      clock,
      logger: createLogger("silent"),
      jobs: [step("first"), step("second"), step("third")],
    });
    await scheduler.tick();
    t.deepEqual(ran, ["first", "second", "third"]);
    t.false(await other.acquire(), "renewed before the third job, the lease has not expired yet");
    await scheduler.close();
    t.true(await other.acquire(), "given up at close");
  });
}
