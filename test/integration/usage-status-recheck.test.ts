import anyTest, { type TestFn } from "ava";
import { type Clock, systemClock } from "../../src/platform/clock.js";
import { inTransaction } from "../../src/platform/database.js";
import { createLogger } from "../../src/platform/logger.js";
import { MeterCounters, type MeterRef } from "../../src/usage/meter-counters.js";
import { usageAssetOf } from "../../src/usage/usage-assets.js";
import { UsageStatusEvents } from "../../src/usage/usage-status-events.js";
import { RECORD_KIND, UsageStore } from "../../src/usage/usage-store.js";
import { Outbox } from "../../src/webhooks/outbox.js";
import { bearerWithScopes } from "../support/credentials.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import {
  API_CALLS,
  meteredEntitlement,
  meteredSession,
  sendUsage,
  usageEventsOf,
  usageItems,
} from "../support/metering.js";
import { defaultAuthorization } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases, type TestServer } from "../support/test-server.js";
import { keepOutboxEvents } from "../support/webhooks.js";

const test = anyTest as TestFn<BothDatabases>;

const MICRO = 1_000_000;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
  for (const server of Object.values(t.context.servers)) await keepOutboxEvents(server);
});

test.after.always(async (t) => {
  await t.context.close?.();
});

/**
 * Another instance's metering parts on the server's database: the instance whose write saw a crossing that a
 * write still in flight completes.
 */
async function otherInstance(server: TestServer, entitlementId: string, clock: Clock = systemClock) {
  const { dataSource, coordinator } = server.app;
  const store = new UsageStore(dataSource);
  const events = new UsageStatusEvents(dataSource, store, new Outbox(dataSource), clock, createLogger("silent"));
  const found = await store.entitlementAssets(entitlementId);
  if (!found) throw new Error("no such entitlement");
  const assets = found.assets.map(usageAssetOf);
  const usage = { entitlementId, ...found, assets, byMetric: new Map(assets.map((a) => [a.metricName, a])) };
  const ref = (await new MeterCounters(store, coordinator.meters, clock).refOf(
    usage,
    assets[0],
    clock.now(),
  )) as MeterRef;
  return { store, events, ref, clock };
}

/** A write of `units` whose reservation saw `hintUnits` in the counter, judged by `events` in its transaction. */
async function writeSeeing(server: TestServer, other: Awaited<ReturnType<typeof otherInstance>>, hintUnits: number) {
  const { events, ref } = other;
  const remember = await inTransaction(server.app.dataSource, (manager) =>
    events.record(manager, [{ ref, valueMicro: hintUnits * MICRO, limitMicro: null, generation: 0 }]),
  );
  remember();
}

/** The write in flight committing `units`, its own reservation below the crossing (so it reports nothing). */
async function commitInFlight(server: TestServer, other: Awaited<ReturnType<typeof otherInstance>>, units: number) {
  const { store, ref, clock } = other;
  const now = clock.now();
  await inTransaction(server.app.dataSource, (manager) =>
    store.insertRecords(
      manager,
      [
        {
          providerId: ref.providerId,
          entitlementId: ref.entitlementId,
          assetId: ref.assetId,
          sessionId: "00000000-0000-4000-8000-0000000000f1",
          transactionId: null,
          kind: RECORD_KIND.preallocation,
          amountMicro: units * MICRO,
          periodStart: ref.periodStart,
          occurredAt: now,
          recordedAt: now,
        },
      ],
      false,
    ),
  );
}

async function recheckAt(server: TestServer, assetId: string): Promise<unknown> {
  const [row] = (await server.app.dataSource.query("SELECT recheck_at FROM usage_statuses WHERE asset_id = ?", [
    assetId,
  ])) as { recheck_at: unknown }[];
  return row?.recheck_at ?? null;
}

/** An entitlement whose API calls stand at 90 (Normal; the Warning tier starts above 100), and the other instance. */
async function ninetyCallsUsed(server: TestServer, asset = API_CALLS, clock: Clock = systemClock) {
  const entitlement = await meteredEntitlement(server.baseUrl, [asset]);
  const session = await meteredSession(server.baseUrl, entitlement);
  const sent = await sendUsage(server.baseUrl, session, usageItems(asset.metricName, [90]));
  if (sent.status !== 200) throw new Error(`usage: ${JSON.stringify(sent.body)}`);
  return { entitlement, other: await otherInstance(server, entitlement.entitlementId, clock) };
}

/** API calls metered per UTC hour. */
const HOURLY_CALLS = {
  ...API_CALLS,
  metricName: "hourly-calls",
  meteredUsage: { ...API_CALLS.meteredUsage, consumptionPeriod: "PT1H" },
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const name of ["MySQL", "SQLite"] as const) {
  test(`${name}: a crossing left to be looked at again is reported by the scheduler when its instance stopped`, async (t) => {
    const server = t.context.servers[name];
    const { entitlement, other } = await ninetyCallsUsed(server);

    await writeSeeing(server, other, 105);
    t.not(await recheckAt(server, other.ref.assetId), null, "the look-again is stored with the status");
    other.events.close();
    await commitInFlight(server, other, 15);
    t.is((await usageEventsOf(server, entitlement.entitlementId)).length, 0, "nobody has reported it yet");

    await server.app.scheduler.tick();
    t.is((await usageEventsOf(server, entitlement.entitlementId)).length, 0, "not before it is due");
    await sleep(1100);
    await server.app.scheduler.tick();
    const events = await usageEventsOf(server, entitlement.entitlementId);
    t.is(events.length, 1);
    t.like(events[0], {
      type: "MeteredUsage.OverageStatusChanged",
      data: { previousSeverity: 1, severity: 2, consumption: 105, assetId: other.ref.assetId },
    });
    t.is(await recheckAt(server, other.ref.assetId), null);
    await server.app.scheduler.tick();
    t.is((await usageEventsOf(server, entitlement.entitlementId)).length, 1, "reported once");
  });

  test(`${name}: the instance's own look again reports the crossing once and clears what it stored`, async (t) => {
    const server = t.context.servers[name];
    const { entitlement, other } = await ninetyCallsUsed(server);

    await writeSeeing(server, other, 105);
    await commitInFlight(server, other, 15);
    for (let waited = 0; waited < 5000 && (await recheckAt(server, other.ref.assetId)) !== null; waited += 100) {
      await sleep(100);
    }
    t.is(await recheckAt(server, other.ref.assetId), null);
    await server.app.scheduler.tick();
    const events = await usageEventsOf(server, entitlement.entitlementId);
    t.deepEqual(
      events.map((event) => [event.type, event.data.previousSeverity, event.data.severity]),
      [["MeteredUsage.OverageStatusChanged", 1, 2]],
    );
    other.events.close();
  });
}

const HOUR = 3_600_000;

/**
 * Runs `scenario` on a server of each database sharing one manual clock, each time two seconds before an hour
 * ends, with an entitlement whose hourly API calls stand at 90 and the other instance's parts.
 */
async function beforeAnHourEnds(
  scenario: (
    server: TestServer,
    clock: ManualClock,
    used: Awaited<ReturnType<typeof ninetyCallsUsed>> & { periodStart: number },
  ) => Promise<void>,
) {
  const clock = manualClock(Date.parse("2026-03-01T12:30:00Z"));
  const { servers, close } = await startOnBothDatabases({ clock });
  try {
    for (const server of Object.values(servers)) {
      const periodStart = Math.floor(clock.now().getTime() / HOUR) * HOUR;
      clock.advance(periodStart + HOUR - 2000 - clock.now().getTime());
      await keepOutboxEvents(server);
      defaultAuthorization.set(server.baseUrl, await bearerWithScopes(server, ["*"]));
      const used = await ninetyCallsUsed(server, HOURLY_CALLS, clock);
      await scenario(server, clock, { ...used, periodStart });
      used.other.events.close();
    }
  } finally {
    await close();
  }
}

test.serial("a crossing left to be looked at again is reported for its own period after that period ended", (t) =>
  beforeAnHourEnds(async (server, clock, { entitlement, other, periodStart }) => {
    await writeSeeing(server, other, 105);
    other.events.close();
    await commitInFlight(server, other, 15);
    clock.advance(2 * 60_000);
    await server.app.scheduler.tick();
    // Events are listed by their time: the way back is written a second later.
    clock.advance(1000);
    await server.app.scheduler.tick();
    const events = await usageEventsOf(server, entitlement.entitlementId);
    const hour = (ms: number) => new Date(ms).toISOString().replace(".000", "");
    t.deepEqual(
      events.map(({ data }) => [data.previousSeverity, data.severity, data.periodStart, data.consumption]),
      [
        [1, 2, hour(periodStart), 105],
        [2, 1, hour(periodStart + HOUR), 0],
      ],
    );
  }),
);

test.serial("a crossing whose write reaches the status just after its period ended is still reported", (t) =>
  beforeAnHourEnds(async (server, clock, { entitlement, other }) => {
    await commitInFlight(server, other, 15);
    // The write of usage dated while the period ran, its turn come only after the period's end.
    clock.advance(5000);
    await writeSeeing(server, other, 105);
    const events = await usageEventsOf(server, entitlement.entitlementId);
    t.deepEqual(
      events.map(({ data }) => [data.previousSeverity, data.severity, data.consumption]),
      [[1, 2, 105]],
    );
  }),
);
