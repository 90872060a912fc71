import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { bearerWithScopes } from "../support/credentials.js";
import { entitlementWithCode } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { pollUntil } from "../support/poll.js";
import { defaultAuthorization, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { type Received, sign, WebhookReceiver } from "../support/webhook-receiver.js";
import { SUBSCRIPTIONS, waitForNoClaimedDelivery, waitForState } from "../support/webhooks.js";

// Secret rotation: during the overlap every delivery carries two signatures (new first), and a challenge reply
// signed with the previous secret is accepted; after it only the new secret signs. Each server runs on a
// manual clock, so the overlap ends exactly when a test moves the clock past it. Receivers are on 127.0.0.1.

interface Context {
  servers: Record<Mode, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const ENV = {
  WEBHOOK_TRUSTED_TARGETS: "127.0.0.1",
  WEBHOOK_RETRY_SCHEDULE: "0s,200ms,400ms",
  WEBHOOK_POLL_INTERVAL_MS: "100",
};
const DAY_MS = 24 * 3600_000;

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-webhook-rotation-"));
  t.context.servers = {} as Context["servers"];
  for (const mode of MODES) {
    const clock = manualClock();
    const embedded = mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {};
    const server = await startTestServer({ ...embedded, clock, env: ENV, webhooks: { random: () => 0.5 } });
    t.context.servers[mode] = { server, clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** Moves the server's clock once no delivery is in flight; the admin token `rest()` sends is minted again on the new time. */
async function advance(t: ExecutionContext<Context>, mode: Mode, ms: number) {
  const { server, clock } = t.context.servers[mode];
  await waitForNoClaimedDelivery(server);
  clock.advance(ms);
  defaultAuthorization.set(server.baseUrl, await bearerWithScopes(server, ["*"]));
}

/** A subscription to a new receiver for the Entitlement events; Active unless the receiver refuses the challenge. */
async function subscribe(server: TestServer, receiver: WebhookReceiver) {
  const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, {
    url: receiver.url(),
    eventTypes: ["Entitlement.*"],
  });
  if (created.status !== 200) throw new Error(`subscription: ${JSON.stringify(created.body)}`);
  receiver.secret = created.body.secret;
  return { id: created.body.subscription.id as string, secret: created.body.secret as string };
}

async function rotate(server: TestServer, id: string, request: Record<string, unknown> = {}) {
  const rotated = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/secret`, request);
  if (rotated.status !== 200) throw new Error(`rotation: ${rotated.status} ${JSON.stringify(rotated.body)}`);
  return { secret: rotated.body.secret as string, expiresAt: Date.parse(rotated.body.previousSecretExpiresAt) };
}

/**
 * A licensing change the subscription hears of: the receiver's copy of its PlanApplied event, once the service
 * has recorded the delivery as succeeded (so no claim of it is left when the clock moves).
 */
async function deliveredChange(server: TestServer, receiver: WebhookReceiver, subscriptionId: string) {
  const { entitlementId } = await entitlementWithCode(server.baseUrl, {});
  const received = await receiver.waitFor(
    (candidate) =>
      candidate.envelope.type === "Entitlement.PlanApplied" && candidate.envelope.entityid === entitlementId,
  );
  await pollUntil(`the delivery of ${received.envelope.id} recorded`, async () => {
    const listed = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${subscriptionId}/deliveries?status=2`);
    return listed.body.items.some((item: { eventId: string }) => item.eventId === received.envelope.id) || undefined;
  });
  return received;
}

/** The `webhook-signature` entries, in order. */
function signatures(received: Received): string[] {
  return String(received.headers["webhook-signature"]).split(" ");
}

/** The `v1` signature of a received request with `secret`, computed by the test. */
function expectedSignature(received: Received, secret: string): string {
  const id = String(received.headers["webhook-id"]);
  const timestamp = String(received.headers["webhook-timestamp"]);
  return `v1,${sign(secret, id, timestamp, received.body)}`;
}

/** A correct challenge echo, signed with `secret` (which may not be the subscription's current one). */
function challengeReplySignedWith(secret: () => string) {
  return (received: Received) => {
    if (received.envelope.type !== "Webhooks.Registration.Challenge") return { status: 204 };
    const body = JSON.stringify({ challenge: received.envelope.data.challenge });
    const id = String(received.headers["webhook-id"]);
    const timestamp = String(received.headers["webhook-timestamp"]);
    return {
      status: 200,
      headers: { "webhook-signature": `v1,${sign(secret(), id, timestamp, Buffer.from(body))}` },
      body,
    };
  };
}

async function cleanUp(server: TestServer, receiver: WebhookReceiver, ids: string[]) {
  for (const id of ids) await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`);
  await receiver.close();
}

each("after a rotation deliveries carry the new and the previous signature until the overlap ends", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const { id, secret: previous } = await subscribe(server, receiver);
  try {
    await waitForState(server, id, 2);
    const before = await deliveredChange(server, receiver, id);
    t.deepEqual(signatures(before), [expectedSignature(before, previous)], "one signature before any rotation");

    const rotated = await rotate(server, id);
    t.regex(rotated.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    t.not(rotated.secret, previous);
    t.is(rotated.expiresAt, clock.now().getTime() + DAY_MS, "the default overlap is 24 hours");

    const during = await deliveredChange(server, receiver, id);
    t.deepEqual(
      signatures(during),
      [expectedSignature(during, rotated.secret), expectedSignature(during, previous)],
      "new first, then previous, each with its own secret",
    );
    t.not(signatures(during)[0], signatures(during)[1]);

    await advance(t, mode, DAY_MS - 1000);
    const late = await deliveredChange(server, receiver, id);
    t.is(signatures(late).length, 2, "a second before the end of the overlap both still sign");

    await advance(t, mode, 1000);
    const after = await deliveredChange(server, receiver, id);
    t.deepEqual(signatures(after), [expectedSignature(after, rotated.secret)], "only the new secret after the overlap");
  } finally {
    await cleanUp(server, receiver, [id]);
  }
});

each("a short overlapPeriod ends on time, and rotating again drops the older secret at once", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const { id, secret: first } = await subscribe(server, receiver);
  try {
    await waitForState(server, id, 2);
    const chosen = `whsec_${Buffer.alloc(24, 9).toString("base64")}`;
    const second = await rotate(server, id, { secret: chosen, overlapPeriod: "00:00:01" });
    t.is(second.secret, chosen, "a secret of the vendor's choice");
    t.is(second.expiresAt, clock.now().getTime() + 1000);
    const during = await deliveredChange(server, receiver, id);
    t.deepEqual(signatures(during), [expectedSignature(during, chosen), expectedSignature(during, first)]);

    await advance(t, mode, 1000);
    const after = await deliveredChange(server, receiver, id);
    t.deepEqual(signatures(after), [expectedSignature(after, chosen)], "the overlap ends at its instant");

    const third = await rotate(server, id, { overlapPeriod: "01:00:00" });
    const fourth = await rotate(server, id, { overlapPeriod: "01:00:00" });
    const latest = await deliveredChange(server, receiver, id);
    t.deepEqual(
      signatures(latest),
      [expectedSignature(latest, fourth.secret), expectedSignature(latest, third.secret)],
      "only the secret rotated away last keeps signing",
    );

    const tooLong = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/secret`, {
      overlapPeriod: "8.00:00:00",
    });
    t.is(tooLong.status, 400, "an overlap beyond 7 days is refused");
    const notASecret = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/secret`, { secret: "whsec_short" });
    t.is(notASecret.status, 400);
    const unchanged = await deliveredChange(server, receiver, id);
    t.is(signatures(unchanged)[0], expectedSignature(unchanged, fourth.secret), "refused rotations change nothing");
  } finally {
    await cleanUp(server, receiver, [id]);
  }
});

each("a challenge reply signed with the previous secret is accepted during the overlap only", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  receiver.answer = () => ({ status: 503 });
  const accepted = await subscribe(server, receiver);
  const refused = await subscribe(server, receiver);
  try {
    await receiver.waitFor((received) => received.envelope.data.subscriptionId === refused.id);
    // Both first challenges failed (503); their retries wait for a clock that does not move.

    const rotated = await rotate(server, accepted.id);
    receiver.answer = challengeReplySignedWith(() => accepted.secret);
    const verify = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${accepted.id}/verify`, {});
    t.is(verify.status, 200, JSON.stringify(verify.body));
    await waitForState(server, accepted.id, 2);
    const challenge = await receiver.waitFor(
      (received) => received.envelope.data.subscriptionId === accepted.id && signatures(received).length === 2,
    );
    t.deepEqual(signatures(challenge), [
      expectedSignature(challenge, rotated.secret),
      expectedSignature(challenge, accepted.secret),
    ]);

    await rotate(server, refused.id, { overlapPeriod: "00:00:01" });
    await advance(t, mode, 2000);
    receiver.answer = challengeReplySignedWith(() => refused.secret);
    const stale = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${refused.id}/verify`, {});
    t.is(stale.status, 200, JSON.stringify(stale.body));
    const detail = await pollUntil("the stale challenge reply recorded", async () => {
      const found = await rest(server.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${stale.body.deliveryId}`);
      return found.body.attempts?.length > 0 ? found.body : undefined;
    });
    t.is(detail.attempts[0].statusCode, 200);
    t.regex(detail.delivery.lastError, /bad response signature/);
    t.is((await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${refused.id}`)).body.state, 1, "still pending");
  } finally {
    await cleanUp(server, receiver, [accepted.id, refused.id]);
  }
});

for (const mode of MODES) {
  test.serial(`the audit's attempt names why a challenge reply was refused (${mode})`, async (t) => {
    const { server } = t.context.servers[mode];
    const receiver = await WebhookReceiver.start();
    const stranger = `whsec_${Buffer.alloc(32, 3).toString("base64")}`;
    receiver.answer = challengeReplySignedWith(() => stranger);
    const { id } = await subscribe(server, receiver);
    try {
      const detail = await pollUntil("the challenge reply recorded", async () => {
        const listed = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries`);
        const delivery = listed.body.items?.[0];
        if (!delivery || delivery.attemptCount === 0 || !delivery.lastError) return undefined;
        return (await rest(server.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${delivery.id}`)).body;
      });
      t.regex(detail.delivery.lastError, /bad response signature/);
      t.regex(detail.attempts[0].error, /bad response signature/);
    } finally {
      await cleanUp(server, receiver, [id]);
    }
  });
}
