import anyTest, { type TestFn } from "ava";
import { bearerWithScopes } from "../support/credentials.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import {
  assetUsageOf,
  CREDITS,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageItems,
} from "../support/metering.js";
import { defaultAuthorization } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

/** Two instances on one MySQL database, the local Redis and one clock: the first runs the scheduler's ticks. */
const test = anyTest as TestFn<{
  scheduling: TestServer;
  serving: TestServer;
  clock: ManualClock;
  drop(): Promise<void>;
}>;

const DAY = 24 * 3_600_000;

/** 50 credits, topped up every midnight (UTC) to 20 fresh ones. */
const DAILY_CREDITS = {
  ...CREDITS,
  metricName: "daily-credits",
  balanceUsage: { ...CREDITS.balanceUsage, autoBalanceCronSchedule: "0 0 * * *", autoBalanceCreditAmount: 20 },
};

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.clock = manualClock();
  const options = { databaseUrl: database.url, clock: t.context.clock, env: { SCHEDULER_INTERVAL_MS: "3600000" } };
  t.context.scheduling = await startTestServer(options);
  t.context.serving = await startTestServer(options);
});

test.after.always(async (t) => {
  await t.context.scheduling?.close();
  await t.context.serving?.close();
  await t.context.drop?.();
});

/** Past the next midnight, with tokens valid then; the scheduling instance tops the balances up. */
async function nextMidnight(t: { context: { scheduling: TestServer; serving: TestServer; clock: ManualClock } }) {
  const { clock, scheduling, serving } = t.context;
  clock.advance(Math.ceil((clock.now().getTime() + 1) / DAY) * DAY - clock.now().getTime() + 60_000);
  for (const server of [scheduling, serving]) {
    defaultAuthorization.set(server.baseUrl, await bearerWithScopes(server, ["*"]));
  }
  await scheduling.app.scheduler.tick();
}

function creditsOf(server: TestServer, entitlementId: string) {
  return assetUsageOf(server.baseUrl, entitlementId, "daily-credits");
}

test.serial("a balance topped up by another instance's schedule is pre-allocated from at once", async (t) => {
  await nextMidnight(t);
  const { scheduling, serving } = t.context;
  const entitlement = await meteredEntitlement(serving.baseUrl, [DAILY_CREDITS], { leaseTime: "30.00:00:00" });
  const session = await meteredSession(serving.baseUrl, entitlement);
  t.like((await preallocate(serving.baseUrl, session, "daily-credits", 50)).body, { granted: true });
  t.like((await preallocate(serving.baseUrl, session, "daily-credits", 1)).body, { granted: false, limit: 50 });
  await nextMidnight(t);
  t.like(await creditsOf(scheduling, entitlement.entitlementId), { limit: 20, creditsLeft: 20 });
  const granted = await preallocate(serving.baseUrl, session, "daily-credits", 5);
  t.like(granted.body, { granted: true, currentValue: 5, limit: 20 }, JSON.stringify(granted.body));
});

test.serial("usage is recorded by an instance that knew the balance's earlier period", async (t) => {
  await nextMidnight(t);
  const { serving } = t.context;
  const entitlement = await meteredEntitlement(serving.baseUrl, [DAILY_CREDITS], { leaseTime: "30.00:00:00" });
  const session = await meteredSession(serving.baseUrl, entitlement);
  t.is((await sendUsage(serving.baseUrl, session, usageItems("daily-credits", [10], 1))).status, 200);
  await nextMidnight(t);
  const recorded = await sendUsage(serving.baseUrl, session, usageItems("daily-credits", [3], 2));
  t.is(recorded.status, 200, JSON.stringify(recorded.body));
  t.like(await creditsOf(serving, entitlement.entitlementId), { consumption: 3, limit: 20, creditsLeft: 17 });
});
