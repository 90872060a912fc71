import anyTest, { type TestFn } from "ava";
import { CREDITS, meteredEntitlement, meteredSession, preallocate } from "../support/metering.js";
import { pollUntil } from "../support/poll.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { WebhookReceiver } from "../support/webhook-receiver.js";
import { isSignedWith, SUBSCRIPTIONS, waitForState } from "../support/webhooks.js";

// Balance events delivered to receivers on 127.0.0.1 (the only trusted target): no traffic leaves loopback.
const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer({
    env: { WEBHOOK_TRUSTED_TARGETS: "127.0.0.1", WEBHOOK_POLL_INTERVAL_MS: "100" },
  });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

async function activeSubscription(server: TestServer, request: Record<string, unknown>) {
  const receiver = await WebhookReceiver.start();
  const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: receiver.url(), ...request });
  if (created.status !== 200) throw new Error(`subscription: ${JSON.stringify(created.body)}`);
  receiver.secret = created.body.secret;
  await waitForState(server, created.body.subscription.id, 2);
  return { receiver, id: created.body.subscription.id as string };
}

function balanceEvents(receiver: WebhookReceiver) {
  return receiver.received.filter((received) => received.envelope.type === "CreditBalance.StatusChanged");
}

test("balance events are delivered signed, and a severities filter picks the crossings it names", async (t) => {
  const { server } = t.context;
  const { receiver: everything } = await activeSubscription(server, { eventTypes: ["CreditBalance.*"] });
  const { receiver: depletedOnly, id: depletedOnlyId } = await activeSubscription(server, {
    eventTypes: ["CreditBalance.StatusChanged", "MeteredUsage.OverageStatusChanged"],
    filter: { severities: [4] },
  });
  const entitlement = await meteredEntitlement(server.baseUrl, [CREDITS]);
  const session = await meteredSession(server.baseUrl, entitlement);
  t.like((await preallocate(server.baseUrl, session, "credits", 45)).body, { granted: true, tier: "Low" });
  t.like((await preallocate(server.baseUrl, session, "credits", 5)).body, { granted: true, quotaUsageLevel: 4 });
  const both = await pollUntil("both balance events", () => {
    const events = balanceEvents(everything);
    return events.length >= 2 ? events : undefined;
  });
  t.deepEqual(both.map((received) => [received.envelope.data.status, received.envelope.data.severity]).sort(), [
    [2, 2],
    [3, 4],
  ]);
  t.true(both.every((received) => isSignedWith(received, everything.secret)));
  t.is(both[0].envelope.entitykind, "monitored-asset");
  const filtered = await pollUntil("the Depleted event", () => {
    const events = balanceEvents(depletedOnly);
    return events.length >= 1 ? events : undefined;
  });
  t.deepEqual(
    filtered.map((received) => received.envelope.data.status),
    [3],
  );
  const deliveries = (await server.app.dataSource.query(
    "SELECT event_type FROM webhook_deliveries WHERE subscription_id = ? AND event_type = ?",
    [depletedOnlyId, "CreditBalance.StatusChanged"],
  )) as unknown[];
  t.is(deliveries.length, 1, "both events were fanned out (the other subscription has both): one matched the filter");
  for (const receiver of [everything, depletedOnly]) await receiver.close();
});
