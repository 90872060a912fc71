import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { expiryNoticesJob } from "../../src/licensing/expiry-notices.js";
import { subscriptionRenewalsJob } from "../../src/licensing/subscription-renewals.js";
import type { ScheduledJob } from "../../src/platform/scheduler.js";
import { Outbox } from "../../src/webhooks/outbox.js";
import { mintAccessToken } from "../support/credentials.js";
import { ENTITLEMENTS } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { defaultAuthorization, PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { keepOutboxEvents } from "../support/webhooks.js";

// The scheduler's scans of trial and subscription entitlements go a page at a time, giving the event loop a turn
// between pages; run here with pages of 2 over 5 entitlements each, so that every page boundary is crossed.

interface Context {
  servers: Record<string, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const DAY = 86_400_000;
const PAGE = 2;
const COUNT = 5;
/** The service's own scheduler stays out of the way: these tests run the jobs themselves. */
const ENV = { SCHEDULER_INTERVAL_MS: "3600000" };

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-scans-"));
  t.context.servers = {};
  for (const mode of MODES) {
    const clock = manualClock(Date.now());
    const embedded = mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {};
    t.context.servers[mode] = { server: await startTestServer({ ...embedded, env: ENV, clock }), clock };
    await keepOutboxEvents(t.context.servers[mode].server);
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

async function entitlements(server: TestServer, fields: Record<string, unknown>): Promise<string[]> {
  const product = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: `SCAN-${Math.random().toString(36).slice(2, 10)}`,
    productVersion: "1",
    name: "Scanned",
  });
  const ids: string[] = [];
  for (let index = 0; index < COUNT; index++) {
    const created = await rest(server.baseUrl, "POST", ENTITLEMENTS, {
      name: `Customer ${index}`,
      productIds: [product.body.id],
      ...fields,
    });
    if (created.status !== 200) throw new Error(JSON.stringify(created.body));
    ids.push(created.body.id);
  }
  return ids;
}

/** Runs the job, counting the event loop's turns meanwhile (a turn is when a setImmediate callback runs). */
async function runCountingTurns(job: ScheduledJob, now: Date): Promise<number> {
  let turns = 0;
  let running = true;
  const turn = () => {
    if (!running) return;
    turns++;
    setImmediate(turn);
  };
  setImmediate(turn);
  try {
    await job.run(now);
  } finally {
    running = false;
  }
  return turns;
}

/** How many events of `type` the outbox holds for each of `ids`. */
async function eventCounts(server: TestServer, type: string, ids: string[]): Promise<number[]> {
  const rows = (await server.app.dataSource.query("SELECT entity_id FROM webhook_events WHERE type = ?", [type])) as {
    entity_id: string;
  }[];
  return ids.map((id) => rows.filter((row) => row.entity_id === id).length);
}

each("a renewal is announced for every subscription entitlement, across every page of the scan", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const ids = await entitlements(server, {
    activationPolicy: {
      subscriptionPolicy: {
        isSubscriptionActive: true,
        nextRenewalTimeStamp: new Date(clock.now().getTime() + DAY).toISOString(),
        renewPeriod: "day",
        subscriptionPeriodsLeft: -1,
      },
    },
  });
  clock.advance(DAY + 1000);
  defaultAuthorization.set(server.baseUrl, `Bearer ${await mintAccessToken(server.app, server.admin.clientId, ["*"])}`);
  const job = subscriptionRenewalsJob({
    dataSource: server.app.dataSource,
    events: new Outbox(server.app.dataSource),
    entitlementChanged: async () => {},
    pageSize: PAGE,
  });

  const turns = await runCountingTurns(job, clock.now());
  t.deepEqual(await eventCounts(server, "Entitlement.Renewed", ids), [1, 1, 1, 1, 1]);
  t.true(turns >= Math.floor(COUNT / PAGE), `the event loop turned ${turns} times during the scan`);
  await job.run(clock.now());
  t.deepEqual(await eventCounts(server, "Entitlement.Renewed", ids), [1, 1, 1, 1, 1], "once each");
});

each("a trial ending within the lead time is noticed on every page of the scan", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const ids = await entitlements(server, {
    isTrial: true,
    activationPolicy: { trialActivationPolicy: { trialPeriod: "2.00:00:00" } },
  });
  const job = expiryNoticesJob(
    server.app.dataSource,
    new Outbox(server.app.dataSource),
    { expiringMs: 7 * DAY, trialExpiringMs: 3 * DAY },
    PAGE,
  );

  const turns = await runCountingTurns(job, clock.now());
  t.deepEqual(await eventCounts(server, "Entitlement.TrialExpiring", ids), [1, 1, 1, 1, 1]);
  t.true(turns >= Math.floor(COUNT / PAGE), `the event loop turned ${turns} times during the scan`);
  await job.run(clock.now());
  t.deepEqual(await eventCounts(server, "Entitlement.TrialExpiring", ids), [1, 1, 1, 1, 1], "once each");
});
