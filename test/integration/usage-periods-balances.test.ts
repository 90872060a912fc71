import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { bearerWithScopes } from "../support/credentials.js";
import { sessionCall } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import {
  API_CALLS,
  assetUsageOf,
  CREDITS,
  creditsPath,
  entitlementUsagePath,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageEventsOf,
  usageItems,
} from "../support/metering.js";
import { sendRecords } from "../support/observability.js";
import { defaultAuthorization, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { keepOutboxEvents } from "../support/webhooks.js";

// Each server runs on a clock of its own, moved by the tests: they run one at a time.
type Kind = "mysql" | "embedded";
interface Context {
  servers: Record<Kind, TestServer>;
  clocks: Record<Kind, ManualClock>;
  directory: string;
}
const test = anyTest as TestFn<Context>;

const HOUR = 3_600_000;
/** Leases long enough for the clock moves below. */
const LONG_LEASE = { leaseTime: "30.00:00:00" };

/** Metered per UTC hour, with the same tiers as API_CALLS. */
const HOURLY = {
  ...API_CALLS,
  metricName: "hourly",
  meteredUsage: { ...API_CALLS.meteredUsage, consumptionPeriod: "PT1H" },
};

/** A gauge: the period's value is the highest amount; above 20 is blocked. */
const SEATS_IN_USE = {
  metricName: "seats-in-use",
  name: "Concurrent users",
  metricType: 1,
  meteredUsage: {
    consumptionPeriod: "P1D",
    accumulationMethod: 1,
    usageTiers: [
      { name: "Included", startUsage: 0, endUsage: 10, quotaUsageLevel: 1, quotaUsagePolicy: 1 },
      { name: "Busy", startUsage: 10, endUsage: 20, quotaUsageLevel: 3, quotaUsagePolicy: 2 },
      { name: "Over", startUsage: 20, endUsage: 0, quotaUsageLevel: 4, quotaUsagePolicy: 3 },
    ],
  },
};

/** 50 credits topped up every midnight (UTC) with 20 more, carrying over at most 5 of what is left. */
/** Credits that never run out. */
const UNLIMITED_CREDITS = {
  metricName: "unlimited",
  name: "Unlimited",
  metricType: 2,
  balanceUsage: { isUnlimitedCredits: true },
};

const DAILY_CREDITS = {
  ...CREDITS,
  metricName: "daily-credits",
  balanceUsage: {
    ...CREDITS.balanceUsage,
    autoBalanceCronSchedule: "0 0 * * *",
    autoBalanceCreditAmount: 20,
    shouldAutoBalanceTransferCurrentCredits: true,
    maxAutoBalanceCreditTransferAmount: 5,
  },
};

test.before(async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-usage-clock-"));
  t.context.directory = directory;
  t.context.clocks = { mysql: manualClock(), embedded: manualClock() };
  const env = { SCHEDULER_INTERVAL_MS: "3600000" };
  t.context.servers = {
    mysql: await startTestServer({ clock: t.context.clocks.mysql, env }),
    embedded: await startTestServer({
      clock: t.context.clocks.embedded,
      env,
      embedded: { file: path.join(directory, "usage.sqlite") },
    }),
  };
  for (const server of Object.values(t.context.servers)) await keepOutboxEvents(server);
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.directory, { recursive: true, force: true });
});

/** Moves the server's clock (events are ordered by their time: tests move it between them), and gives its bootstrap client a token that is valid then. */
async function advance(server: TestServer, clock: ManualClock, ms: number) {
  clock.advance(ms);
  defaultAuthorization.set(server.baseUrl, await bearerWithScopes(server, ["*"]));
}

/** A session of a new entitlement to `assets`, made at the server's clock as it stands. */
async function sessionOnClock(context: Context, kind: Kind, assets: Record<string, unknown>[]) {
  const server = context.servers[kind];
  const clock = context.clocks[kind];
  await advance(server, clock, 0);
  const entitlement = await meteredEntitlement(server.baseUrl, assets, LONG_LEASE);
  return { server, clock, entitlement, session: await meteredSession(server.baseUrl, entitlement) };
}

async function assetEvents(server: TestServer, entitlementId: string, metric: string) {
  return (await usageEventsOf(server, entitlementId, metric)).map((event) => event.data);
}

function usageOf(server: TestServer, entitlementId: string, metric: string) {
  return assetUsageOf(server.baseUrl, entitlementId, metric);
}

/** Metered per month, accepting items dated at most a minute back. */
const RECENT_ONLY = { ...API_CALLS, metricName: "recent-only", allowedBackDatingTolerance: "00:01:00" };

for (const kind of ["mysql", "embedded"] as const) {
  test.serial(
    `${kind}: a batch retried after its items aged past the tolerance counts them as duplicates`,
    async (t) => {
      const { server, clock, entitlement, session } = await sessionOnClock(t.context, kind, [RECENT_ONLY]);
      const dated = (transactionId: number) => ({
        transactionId,
        eventName: "recent-only",
        eventData: "3",
        creationDateTime: new Date(clock.now().getTime() - 30_000).toISOString(),
      });
      const batch = [dated(1), dated(2)];
      t.deepEqual((await sendUsage(server.baseUrl, session, batch)).body, { acceptedCount: 2, duplicateCount: 0 });
      await advance(server, clock, 60_000);
      const retried = await sendUsage(server.baseUrl, session, batch);
      t.deepEqual(retried.body, { acceptedCount: 0, duplicateCount: 2 }, JSON.stringify(retried.body));
      const withNew = await sendUsage(server.baseUrl, session, [...batch, ...usageItems("recent-only", [4], 3)]);
      t.deepEqual(withNew.body, { acceptedCount: 1, duplicateCount: 2 }, JSON.stringify(withNew.body));
      const unrecorded = await sendUsage(server.baseUrl, session, [
        ...batch,
        { ...dated(5), creationDateTime: batch[0].creationDateTime },
        ...usageItems("recent-only", [1], 6),
      ]);
      t.is(unrecorded.status, 400, JSON.stringify(unrecorded.body));
      t.deepEqual(
        unrecorded.body.errors.map((error: { field: string }) => error.field),
        ["events[2].creationDateTime"],
      );
      const alsoBad = await sendUsage(server.baseUrl, session, [
        { ...dated(7), creationDateTime: batch[0].creationDateTime },
        { transactionId: 8, eventName: "recent-only", eventData: "-1" },
      ]);
      t.deepEqual(
        alsoBad.body.errors.map((error: { field: string }) => error.field),
        ["events[1].eventData", "events[0].creationDateTime"],
        "a batch refused for another item names the items too old as well",
      );
      t.like(await usageOf(server, entitlement.entitlementId, "recent-only"), { consumption: 10 });
    },
  );

  test.serial(
    `${kind}: a new period starts from zero, and its first tick reports the way back to Normal`,
    async (t) => {
      const server = t.context.servers[kind];
      await advance(server, t.context.clocks[kind], 0);
      const clock = t.context.clocks[kind];
      const entitlement = await meteredEntitlement(server.baseUrl, [HOURLY], LONG_LEASE);
      const session = await meteredSession(server.baseUrl, entitlement);
      t.is((await sendUsage(server.baseUrl, session, usageItems("hourly", [110]))).status, 200);
      const before = await usageOf(server, entitlement.entitlementId, "hourly");
      t.like(before, { consumption: 110, tier: "Overage", severity: 2, limit: 120 });
      await advance(server, clock, HOUR);
      await server.app.scheduler.tick();
      t.deepEqual(
        (await assetEvents(server, entitlement.entitlementId, "hourly")).map((data) => data.severity),
        [2, 1],
        "the new period's first tick reports Normal, before any use",
      );
      await advance(server, clock, 1000);
      const next = await preallocate(server.baseUrl, session, "hourly", 1);
      t.like(next.body, { granted: true, currentValue: 1, tier: "Included" });
      const events = await assetEvents(server, entitlement.entitlementId, "hourly");
      t.deepEqual(
        events.map((data) => [data.previousSeverity, data.severity]),
        [
          [1, 2],
          [2, 1],
        ],
      );
      t.is(Date.parse(events[1].periodStart) - Date.parse(events[0].periodStart), HOUR);
      t.like(await usageOf(server, entitlement.entitlementId, "hourly"), { consumption: 1, severity: 1 });
    },
  );

  test.serial(
    `${kind}: a new period's first write, before the scheduler's tick, reports the way back to Normal, then its rise`,
    async (t) => {
      const { server, clock, entitlement, session } = await sessionOnClock(t.context, kind, [HOURLY]);
      t.is((await sendUsage(server.baseUrl, session, usageItems("hourly", [110]))).status, 200);
      await advance(server, clock, HOUR);
      t.is((await sendUsage(server.baseUrl, session, usageItems("hourly", [105], 2))).status, 200);
      const events = await assetEvents(server, entitlement.entitlementId, "hourly");
      t.deepEqual(
        events.map((data) => [data.previousSeverity, data.severity, data.consumption]),
        [
          [1, 2, 110],
          [2, 1, 0],
          [1, 2, 105],
        ],
      );
      t.is(Date.parse(events[1].periodStart) - Date.parse(events[0].periodStart), HOUR);
      t.is(events[2].periodStart, events[1].periodStart);
      await server.app.scheduler.tick();
      t.is((await assetEvents(server, entitlement.entitlementId, "hourly")).length, 3, "the tick adds nothing");
    },
  );

  test.serial(
    `${kind}: an item dated into the next period (a clock running ahead) counts there and moves no status`,
    async (t) => {
      const { server, clock, entitlement, session } = await sessionOnClock(t.context, kind, [HOURLY]);
      const nextHour = Math.ceil((clock.now().getTime() + 1) / HOUR) * HOUR;
      await advance(server, clock, nextHour - 60_000 - clock.now().getTime());
      const ahead = new Date(nextHour + 1000).toISOString();
      const early = [{ transactionId: 1, eventName: "hourly", eventData: "105", creationDateTime: ahead }];
      t.is((await sendUsage(server.baseUrl, session, early)).status, 200);
      t.is((await sendUsage(server.baseUrl, session, usageItems("hourly", [120], 2))).status, 200);
      t.like(await usageOf(server, entitlement.entitlementId, "hourly"), { consumption: 120, severity: 2 });
      t.deepEqual(
        (await assetEvents(server, entitlement.entitlementId, "hourly")).map((data) => [
          data.previousSeverity,
          data.severity,
          Date.parse(data.periodStart),
        ]),
        [[1, 2, nextHour - HOUR]],
        "the current period's crossing, not the next one's",
      );
      const mixed = await sessionOnClock(t.context, kind, [HOURLY]);
      const together = [
        { transactionId: 1, eventName: "hourly", eventData: "1", creationDateTime: ahead },
        { transactionId: 2, eventName: "hourly", eventData: "110" },
      ];
      t.is((await sendUsage(server.baseUrl, mixed.session, together)).status, 200);
      t.deepEqual(
        (await assetEvents(server, mixed.entitlement.entitlementId, "hourly")).map((data) => data.severity),
        [2],
        "in one batch too, the early item hides nothing of the current period",
      );
    },
  );

  test.serial(
    `${kind}: an item dated in the previous period counts there, not in the current one, and raises no event`,
    async (t) => {
      const server = t.context.servers[kind];
      await advance(server, t.context.clocks[kind], 0);
      const clock = t.context.clocks[kind];
      const entitlement = await meteredEntitlement(server.baseUrl, [HOURLY], LONG_LEASE);
      const session = await meteredSession(server.baseUrl, entitlement);
      const previousHour = new Date(Math.floor(clock.now().getTime() / HOUR) * HOUR - 60_000).toISOString();
      const items = [{ transactionId: 1, eventName: "hourly", eventData: "115", creationDateTime: previousHour }];
      t.is((await sendUsage(server.baseUrl, session, items)).status, 200);
      t.like(await usageOf(server, entitlement.entitlementId, "hourly"), { consumption: 0 });
      const blocked = await sendUsage(server.baseUrl, session, [
        { transactionId: 2, eventName: "hourly", eventData: "10", creationDateTime: previousHour },
      ]);
      t.is(blocked.status, 403, "the previous period's own tiers apply to it");
      await server.app.scheduler.tick();
      t.deepEqual(
        await assetEvents(server, entitlement.entitlementId, "hourly"),
        [],
        "a crossing in an ended period raises no event, and so no way back either",
      );
      const listed = await rest(
        server.baseUrl,
        "GET",
        `${entitlementUsagePath(entitlement.entitlementId)}/transactions?metric=hourly`,
      );
      t.is(listed.body.totalCount, 1);
      t.like(listed.body.items[0], { transactionId: "1", kind: "transaction", amount: 115 });
      t.is(Date.parse(listed.body.items[0].occurredAt), Date.parse(previousHour));
    },
  );

  test.serial(
    `${kind}: Peak keeps the period's highest amount, and a higher one in a Block tier is refused`,
    async (t) => {
      const server = t.context.servers[kind];
      await advance(server, t.context.clocks[kind], 0);
      const entitlement = await meteredEntitlement(server.baseUrl, [SEATS_IN_USE], LONG_LEASE);
      const session = await meteredSession(server.baseUrl, entitlement);
      t.is((await sendUsage(server.baseUrl, session, usageItems("seats-in-use", [5, 8, 3]))).status, 200);
      t.like(await usageOf(server, entitlement.entitlementId, "seats-in-use"), {
        consumption: 8,
        accumulationMethod: 1,
      });
      t.like((await preallocate(server.baseUrl, session, "seats-in-use", 12)).body, {
        granted: true,
        currentValue: 12,
        tier: "Busy",
        quotaUsageLevel: 3,
      });
      t.is((await sendUsage(server.baseUrl, session, usageItems("seats-in-use", [25], 4))).status, 403);
      t.is((await sendUsage(server.baseUrl, session, usageItems("seats-in-use", [9], 5))).status, 200);
      t.like(await usageOf(server, entitlement.entitlementId, "seats-in-use"), { consumption: 12, severity: 3 });
      const events = await assetEvents(server, entitlement.entitlementId, "seats-in-use");
      t.deepEqual(
        events.map((data) => [data.previousSeverity, data.severity, data.tier]),
        [[1, 3, "Busy"]],
      );
    },
  );

  test.serial(`${kind}: a manual top-up adds credits at once and reports the way back to Normal`, async (t) => {
    const server = t.context.servers[kind];
    const clock = t.context.clocks[kind];
    await advance(server, t.context.clocks[kind], 0);
    const entitlement = await meteredEntitlement(server.baseUrl, [CREDITS], LONG_LEASE);
    const session = await meteredSession(server.baseUrl, entitlement);
    t.like((await preallocate(server.baseUrl, session, "credits", 45)).body, { granted: true, quotaUsageLevel: 2 });
    await advance(server, clock, 1000);
    const topUp = await rest(server.baseUrl, "POST", creditsPath(entitlement.entitlementId, "credits"), { amount: 50 });
    t.is(topUp.status, 200, JSON.stringify(topUp.body));
    t.like(topUp.body, { consumption: 45, limit: 100, creditsLeft: 55, balanceStatus: 1, cumulativeCreditsUsed: 45 });
    t.truthy(topUp.body.lastDeposit);
    await advance(server, clock, 1000);
    t.like((await preallocate(server.baseUrl, session, "credits", 55)).body, { granted: true, currentValue: 100 });
    t.like((await preallocate(server.baseUrl, session, "credits", 0.000001)).body, { granted: false });
    const events = await assetEvents(server, entitlement.entitlementId, "credits");
    t.deepEqual(
      events.map((data) => [data.previousStatus, data.status]),
      [
        [1, 2],
        [2, 1],
        [1, 3],
      ],
    );
    const bad = await rest(server.baseUrl, "POST", creditsPath(entitlement.entitlementId, "credits"), { amount: -1 });
    t.is(bad.status, 400);
    const metered = await meteredEntitlement(server.baseUrl, [API_CALLS]);
    const wrong = await rest(server.baseUrl, "POST", creditsPath(metered.entitlementId, "api-calls"), { amount: 1 });
    t.is(wrong.status, 400);
  });

  test.serial(
    `${kind}: balances stay within the exact bound: top-ups past it refused, unlimited use blocked at it`,
    async (t) => {
      const server = t.context.servers[kind];
      await advance(server, t.context.clocks[kind], 0);
      const entitlement = await meteredEntitlement(server.baseUrl, [CREDITS, UNLIMITED_CREDITS], LONG_LEASE);
      const topUp = (amount: number) =>
        rest(server.baseUrl, "POST", creditsPath(entitlement.entitlementId, "credits"), { amount });
      for (let deposit = 0; deposit < 9; deposit++) t.is((await topUp(1e9)).status, 200);
      const tooMuch = await topUp(7_199_204.740992);
      t.is(tooMuch.status, 409, JSON.stringify(tooMuch.body));
      t.is(tooMuch.body.type, "urn:provision:problem:balance-too-large");
      const exact = await topUp(7_199_204.740991);
      t.like(
        exact.body,
        // 2^53 - 1 micro-units, as the double the report shows it as.
        { limit: (2 ** 53 - 1) / 1e6, creditsLeft: (2 ** 53 - 1) / 1e6 },
        JSON.stringify(exact.body),
      );
      t.is((await topUp(0.000001)).status, 409, "the balance holds the most it keeps exactly");

      const session = await meteredSession(server.baseUrl, entitlement);
      const batch = (firstId: number) => usageItems("unlimited", [1e9, 1e9, 1e9], firstId);
      for (const firstId of [1, 4, 7]) t.is((await sendUsage(server.baseUrl, session, batch(firstId))).status, 200);
      const past = await sendUsage(server.baseUrl, session, usageItems("unlimited", [7_199_254.740992], 10));
      t.is(past.status, 403, JSON.stringify(past.body));
      t.is(past.body.type, "urn:provision:problem:usage-blocked");
      t.is((await sendUsage(server.baseUrl, session, usageItems("unlimited", [7_199_254.740991], 11))).status, 200);
    },
  );

  test.serial(`${kind}: the auto-balance schedule starts a new balance period on the scheduler's tick`, async (t) => {
    const server = t.context.servers[kind];
    await advance(server, t.context.clocks[kind], 0);
    const clock = t.context.clocks[kind];
    const entitlement = await meteredEntitlement(server.baseUrl, [DAILY_CREDITS], LONG_LEASE);
    const session = await meteredSession(server.baseUrl, entitlement);
    t.like((await preallocate(server.baseUrl, session, "daily-credits", 40)).body, { granted: true, tier: "Low" });
    await server.app.scheduler.tick();
    t.like(await usageOf(server, entitlement.entitlementId, "daily-credits"), { limit: 50, creditsLeft: 10 });
    const midnight = Math.ceil((clock.now().getTime() + 1) / (24 * HOUR)) * 24 * HOUR;
    await advance(server, clock, midnight - clock.now().getTime() + 60_000);
    await server.app.scheduler.tick();
    const usage = await usageOf(server, entitlement.entitlementId, "daily-credits");
    t.like(usage, { consumption: 0, limit: 25, creditsLeft: 25, balanceStatus: 1, cumulativeCreditsUsed: 40 });
    t.is(Date.parse(usage.periodStart), midnight);
    t.truthy(usage.lastAutoBalanceDate);
    await advance(server, clock, 1000);
    t.like((await preallocate(server.baseUrl, session, "daily-credits", 26)).body, { granted: false, limit: 25 });
    t.like((await preallocate(server.baseUrl, session, "daily-credits", 25)).body, { granted: true, currentValue: 25 });
    await server.app.scheduler.tick();
    t.like(await usageOf(server, entitlement.entitlementId, "daily-credits"), { limit: 25, creditsLeft: 0 });
    const events = await assetEvents(server, entitlement.entitlementId, "daily-credits");
    t.deepEqual(
      events.map((data) => [data.previousStatus, data.status]),
      [
        [1, 2],
        [2, 1],
        [1, 3],
      ],
    );
  });
}

for (const kind of ["mysql", "embedded"] as const) {
  test.serial(
    `${kind}: an amount reserved but never written is counted no more after the hourly recount`,
    async (t) => {
      const { server, clock, entitlement, session } = await sessionOnClock(t.context, kind, [API_CALLS]);
      t.like((await preallocate(server.baseUrl, session, "api-calls", 10)).body, { granted: true, currentValue: 10 });
      const usage = await usageOf(server, entitlement.entitlementId, "api-calls");
      // As an instance dying between reserving and writing would leave it.
      const key = { assetId: usage.assetId, periodStartMs: Date.parse(usage.periodStart) };
      t.like(await server.app.coordinator.meters.reserve({ key, amount: 50_000_000, mode: "sum" }), {
        kind: "reserved",
      });
      t.like((await preallocate(server.baseUrl, session, "api-calls", 1)).body, { currentValue: 61 });
      await advance(server, clock, HOUR);
      await server.app.scheduler.tick();
      t.like((await preallocate(server.baseUrl, session, "api-calls", 1)).body, { granted: true, currentValue: 12 });
    },
  );
}

for (const kind of ["mysql", "embedded"] as const) {
  test.serial(`${kind}: a session past its own grace records nothing: usage, pre-allocation, logs`, async (t) => {
    const server = t.context.servers[kind];
    const clock = t.context.clocks[kind];
    await advance(server, clock, 0);
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS], {
      leaseTime: "00:10:00",
      gracePeriod: "00:01:00",
    });
    const session = await meteredSession(server.baseUrl, entitlement);
    const token = session.authorization.slice("Bearer ".length);
    // Each call once while the session runs: the instance remembers the token (REST fast routes).
    t.is((await preallocate(server.baseUrl, session, "api-calls", 1)).status, 200);
    t.is((await sendUsage(server.baseUrl, session, usageItems("api-calls", [1]))).status, 200);
    t.is(
      (await sendRecords(server.baseUrl, session, "log", [{ eventName: "info", eventData: "running" }])).status,
      200,
    );
    // A renewal shortens the session's lease below the token's: its grace ends long before the token's.
    const renewed = await sessionCall(server.baseUrl, token, "renew", { requestedLeaseDuration: "10s" });
    t.is(renewed.status, 200, JSON.stringify(renewed.body));
    clock.advance(10_000 + 60_000 + 1000);

    const refusals = {
      checkIn: await sessionCall(server.baseUrl, token, "check-in"),
      preallocate: await preallocate(server.baseUrl, session, "api-calls", 1),
      usage: await sendUsage(server.baseUrl, session, usageItems("api-calls", [1], 2)),
      log: await sendRecords(server.baseUrl, session, "log", [{ eventName: "info", eventData: "late" }]),
    };
    for (const [call, answer] of Object.entries(refusals)) {
      t.is(answer.status, 401, `${call}: ${JSON.stringify(answer.body)}`);
      t.is(answer.body.type, "urn:provision:problem:invalid-license-token", call);
    }
  });
}
