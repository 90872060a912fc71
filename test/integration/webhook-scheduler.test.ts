import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { sqlDate } from "../../src/platform/database.js";
import { mintAccessToken } from "../support/credentials.js";
import { ENTITLEMENTS } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { defaultAuthorization, PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";
import { WebhookReceiver } from "../support/webhook-receiver.js";
import { SUBSCRIPTIONS, waitForNoClaimedDelivery, waitForState } from "../support/webhooks.js";

// The time-driven work (expiry notices, suspension of failing subscriptions, pruning), run a round at a time with
// a manual clock, on the one instance holding the scheduler lease.

interface Context {
  servers: Record<string, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const DAY = 86_400_000;
const ENV = { WEBHOOK_TRUSTED_TARGETS: "127.0.0.1", WEBHOOK_POLL_INTERVAL_MS: "100" };

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-scheduler-"));
  t.context.servers = {};
  for (const mode of MODES) {
    const clock = manualClock(Date.now());
    const embedded = mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {};
    t.context.servers[mode] = { server: await startTestServer({ ...embedded, env: ENV, clock }), clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** Moves the clock once no delivery is in flight, and gives the admin a token valid at the new time (the last one expired with the move). */
async function advance(server: TestServer, clock: ManualClock, ms: number) {
  await waitForNoClaimedDelivery(server);
  clock.advance(ms);
  defaultAuthorization.set(server.baseUrl, `Bearer ${await mintAccessToken(server.app, server.admin.clientId, ["*"])}`);
}

async function subscribe(server: TestServer, eventTypes: string[]) {
  const receiver = await WebhookReceiver.start();
  const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: receiver.url(), eventTypes });
  if (created.status !== 200) throw new Error(JSON.stringify(created.body));
  receiver.secret = created.body.secret;
  const id = created.body.subscription.id as string;
  await waitForState(server, id, 2);
  return { receiver, id };
}

async function entitlement(server: TestServer, fields: Record<string, unknown>) {
  const product = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: `SCHED-${Math.random().toString(36).slice(2, 10)}`,
    productVersion: "1",
    name: "Scheduled",
  });
  const created = await rest(server.baseUrl, "POST", ENTITLEMENTS, {
    name: "Customer",
    productIds: [product.body.id],
    ...fields,
  });
  if (created.status !== 200) throw new Error(JSON.stringify(created.body));
  return created.body.id as string;
}

/** An entitlement whose subscription renews every `renewPeriod` from `first`, `periodsLeft` times (-1: for ever). */
function subscribedEntitlement(
  server: TestServer,
  { active = true, first, renewPeriod = "day", periodsLeft = -1 }: SubscriptionShape,
) {
  return entitlement(server, {
    activationPolicy: {
      subscriptionPolicy: {
        isSubscriptionActive: active,
        nextRenewalTimeStamp: new Date(first).toISOString(),
        renewPeriod,
        subscriptionPeriodsLeft: periodsLeft,
      },
    },
  });
}

interface SubscriptionShape {
  active?: boolean;
  first: number | Date;
  renewPeriod?: string;
  periodsLeft?: number;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 400));

each(
  "Entitlement.Expiring is sent once, the lead time before expiry, and again when the expiry moves",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const { receiver } = await subscribe(server, ["Entitlement.Expiring"]);
    try {
      const expiresAt = new Date(clock.now().getTime() + 10 * DAY).toISOString();
      const id = await entitlement(server, { expirationDateTime: expiresAt });
      const expiring = () => receiver.received.filter((received) => received.envelope.entityid === id);
      await server.app.scheduler.tick();
      await settle();
      t.is(expiring().length, 0, "10 days before: not yet");
      await advance(server, clock, 3 * DAY + 1000);
      await server.app.scheduler.tick();
      await receiver.waitFor((received) => received.envelope.entityid === id);
      await server.app.scheduler.tick();
      await settle();
      t.is(expiring().length, 1, "once per deadline");
      t.is(Date.parse(String(expiring()[0].envelope.data.expiresAt)), Date.parse(expiresAt));
      const moved = new Date(clock.now().getTime() + 2 * DAY).toISOString();
      await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${id}`, { expirationDateTime: moved });
      await server.app.scheduler.tick();
      await receiver.waitFor(
        (received) =>
          received.envelope.entityid === id &&
          Date.parse(String(received.envelope.data.expiresAt)) === Date.parse(moved),
      );
      t.is(expiring().length, 2, "a moved expiry gets its own notice");
    } finally {
      await receiver.close();
    }
  },
);

each(
  "a subscription failing for 5 days is suspended; re-enabled and verified, it gets what was parked",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const { receiver, id } = await subscribe(server, ["Entitlement.PlanApplied"]);
    try {
      receiver.answer = (received) => receiver.challengeReply(received) ?? { status: 503 };
      const entitlementId = await entitlement(server, {});
      await receiver.waitFor((received) => received.envelope.entityid === entitlementId);
      await settle();
      await advance(server, clock, 5 * DAY + 1000);
      await server.app.scheduler.tick();
      await waitForState(server, id, 4);
      const arrivedBefore = receiver.received.length;
      receiver.answer = (received) => receiver.challengeReply(received) ?? { status: 204 };
      const reenabled = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { state: 2 });
      t.is(reenabled.status, 200, JSON.stringify(reenabled.body));
      t.is(reenabled.body.state, 1, "back to PendingVerification, with a new challenge");
      await waitForState(server, id, 2);
      const redelivered = await receiver.waitFor(
        (received) =>
          received.envelope.entityid === entitlementId && receiver.received.indexOf(received) >= arrivedBefore,
      );
      t.is(redelivered.envelope.type, "Entitlement.PlanApplied");
    } finally {
      await receiver.close();
    }
  },
);

each("a failure's mark with a success at or after it does not suspend the subscription", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver, id } = await subscribe(server, ["Entitlement.PlanApplied"]);
  const standing = async () => {
    const [row] = (await server.app.dataSource.query(
      "SELECT state, failing_since FROM webhook_subscriptions WHERE id = ?",
      [id],
    )) as { state: unknown; failing_since: unknown }[];
    return { state: Number(row.state), failingSince: row.failing_since };
  };
  try {
    const entitlementId = await entitlement(server, {});
    await receiver.waitFor((received) => received.envelope.entityid === entitlementId);
    await settle();
    // A failure recorded in the same batch as that success, judged by the subscription as it was at their claim,
    // leaves its mark though the subscription has not failed since.
    await server.app.dataSource.query("UPDATE webhook_subscriptions SET failing_since = ? WHERE id = ?", [
      sqlDate(mode === "mysql" ? "mysql" : "sqlite", clock.now()),
      id,
    ]);
    await advance(server, clock, 5 * DAY + 1000);
    await server.app.scheduler.tick();
    t.deepEqual(await standing(), { state: 2, failingSince: null }, "still Active, and no longer failing");
  } finally {
    await receiver.close();
  }
});

each("succeeded deliveries are pruned after the retention period", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver, id } = await subscribe(server, ["Entitlement.PlanApplied"]);
  try {
    await entitlement(server, {});
    await receiver.waitFor((received) => received.envelope.type === "Entitlement.PlanApplied");
    await settle();
    const before = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries`);
    t.true(before.body.totalCount >= 2, "the challenge and the event");
    await advance(server, clock, 31 * DAY);
    await server.app.scheduler.tick();
    const after = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries`);
    t.is(after.body.totalCount, 0);
  } finally {
    await receiver.close();
  }
});

test.serial(
  "two instances on one database: the lease lets one run the work, the other takes over when it stops",
  async (t) => {
    const database = await createTestDatabase();
    const clock = manualClock(Date.now());
    const first = await startTestServer({ databaseUrl: database.url, clock, env: ENV });
    const second = await startTestServer({ databaseUrl: database.url, clock, env: ENV });
    try {
      const rows = async () =>
        (await first.app.dataSource.query("SELECT holder, expires_at FROM scheduler_leases")) as { holder: string }[];
      await first.app.scheduler.tick();
      await second.app.scheduler.tick();
      const [held] = await rows();
      t.truthy(held);
      await first.close();
      clock.advance(5 * 60_000);
      await second.app.scheduler.tick();
      const [taken] = (await second.app.dataSource.query("SELECT holder, acquired_at FROM scheduler_leases")) as {
        holder: string;
        acquired_at: string | Date;
      }[];
      t.not(taken.holder, held.holder, "the second instance holds the lease once the first is gone");
      t.is(new Date(taken.acquired_at).getTime(), clock.now().getTime(), "and since the takeover");
    } finally {
      await second.close();
      await database.drop();
    }
  },
);

each("subscription renewals are announced once each, and the end cancels the subscription", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver } = await subscribe(server, ["Entitlement.Renewed", "Entitlement.Cancelled"]);
  try {
    const first = new Date(clock.now().getTime() + DAY);
    const id = await subscribedEntitlement(server, { first, periodsLeft: 2 });
    const mine = () => receiver.received.filter((received) => received.envelope.entityid === id);
    await server.app.scheduler.tick();
    await settle();
    t.is(mine().length, 0, "nothing is due yet");
    await advance(server, clock, DAY + 1000);
    await server.app.scheduler.tick();
    await server.app.scheduler.tick();
    const renewed = await receiver.waitFor((received) => received.envelope.entityid === id);
    t.is(renewed.envelope.type, "Entitlement.Renewed");
    t.is(Date.parse(String(renewed.envelope.data.renewedAt)), first.getTime());
    t.is(renewed.envelope.data.subscriptionPeriodsLeft, 1);
    await advance(server, clock, DAY);
    await server.app.scheduler.tick();
    await receiver.waitFor(
      (received) => received.envelope.entityid === id && received.envelope.data.subscriptionPeriodsLeft === 0,
    );
    await advance(server, clock, DAY);
    await server.app.scheduler.tick();
    const cancelled = await receiver.waitFor(
      (received) => received.envelope.entityid === id && received.envelope.type === "Entitlement.Cancelled",
    );
    t.is(cancelled.envelope.data.reason, "subscription-ended");
    await server.app.scheduler.tick();
    await settle();
    t.deepEqual(
      mine().map((received) => received.envelope.type),
      ["Entitlement.Renewed", "Entitlement.Renewed", "Entitlement.Cancelled"],
      "each once",
    );
    const read = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${id}`);
    t.false(read.body.activationPolicy.subscriptionPolicy.isSubscriptionActive);
  } finally {
    await receiver.close();
  }
});

each("an inactive subscription announces no renewals", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver } = await subscribe(server, ["Entitlement.Renewed"]);
  try {
    const id = await subscribedEntitlement(server, { active: false, first: clock.now().getTime() + DAY });
    await advance(server, clock, 3 * DAY);
    await server.app.scheduler.tick();
    await settle();
    t.is(receiver.received.filter((received) => received.envelope.entityid === id).length, 0);
  } finally {
    await receiver.close();
  }
});

const subscriptionActive = (server: TestServer, id: string, isSubscriptionActive: boolean) =>
  rest(
    server.baseUrl,
    "PUT",
    `/api/v1/provision/operational/entitlement/entitlements/${id}/policies/subscription/active`,
    { isSubscriptionActive },
  );

each(
  "renewals that fell while the subscription was inactive are not announced when it is active again",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const { receiver } = await subscribe(server, ["Entitlement.Renewed"]);
    try {
      const first = clock.now().getTime() + DAY;
      const id = await subscribedEntitlement(server, { first });
      const renewedAt = () =>
        receiver.received
          .filter((received) => received.envelope.entityid === id)
          .map((received) => Date.parse(String(received.envelope.data.renewedAt)) - first);
      await advance(server, clock, DAY + 1000);
      await server.app.scheduler.tick();
      await receiver.waitFor((received) => received.envelope.entityid === id);
      const read = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${id}`);
      t.is(Date.parse(read.body.updatedAt), clock.now().getTime(), "a renewal is a change of the entitlement");

      t.is((await subscriptionActive(server, id, false)).status, 200);
      await advance(server, clock, 3 * DAY);
      await server.app.scheduler.tick();
      t.is((await subscriptionActive(server, id, true)).status, 200);
      await server.app.scheduler.tick();
      await settle();
      t.deepEqual(renewedAt(), [0], "nothing renewed while it was inactive");
      await advance(server, clock, DAY);
      await server.app.scheduler.tick();
      await receiver.waitFor((received) => received.envelope.entityid === id && renewedAt().length === 2);
      t.deepEqual(renewedAt(), [0, 4 * DAY]);
    } finally {
      await receiver.close();
    }
  },
);

each("after the scheduler was down, every renewal within the catch-up window is announced once", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver } = await subscribe(server, ["Entitlement.Renewed"]);
  try {
    const first = clock.now().getTime() + 60_000;
    const id = await subscribedEntitlement(server, { first, renewPeriod: "PT1H" });
    await advance(server, clock, 3 * DAY);
    await server.app.scheduler.tick();
    const mine = () => receiver.received.filter((received) => received.envelope.entityid === id);
    await receiver.waitFor(() => mine().length >= 72);
    await server.app.scheduler.tick();
    await settle();
    const hours = mine()
      .map((received) => (Date.parse(String(received.envelope.data.renewedAt)) - first) / 3_600_000)
      .sort((a, b) => a - b);
    t.deepEqual(
      hours,
      Array.from({ length: 72 }, (_, hour) => hour),
      "every hour once, the earliest included",
    );
  } finally {
    await receiver.close();
  }
});

each("an attempt recorded after its claim was taken over has one audit row, its own", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { receiver, id } = await subscribe(server, ["Entitlement.PlanApplied"]);
  let release = () => {};
  receiver.hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  try {
    const entitlementId = await entitlement(server, {});
    const first = await receiver.waitFor((received) => received.envelope.entityid === entitlementId);
    const eventId = String(first.headers["webhook-id"]);
    // Past the claim (the timeout + 30 s) while the first attempt is still out: the claim is taken over.
    clock.advance(15_000 + 30_000 + 1000);
    await receiver.waitFor((received) => received !== first && received.headers["webhook-id"] === eventId);
    release();
    await waitForNoClaimedDelivery(server);

    const listed = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries?pageSize=100`);
    const delivery = (listed.body.items as { id: string; eventId: string }[]).find((item) => item.eventId === eventId);
    const detail = await rest(server.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${delivery?.id}`);
    const attempts = detail.body.attempts as { attempt: number; statusCode: number; error: string }[];
    t.deepEqual(
      attempts.map((attempt) => [attempt.attempt, attempt.statusCode]),
      [
        [1, 204],
        [2, 204],
      ],
      JSON.stringify(attempts),
    );
  } finally {
    release();
    receiver.hold = undefined;
    await receiver.close();
  }
});
