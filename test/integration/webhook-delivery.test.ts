import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { Webhook } from "standardwebhooks";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionIdOf } from "../support/licensing.js";
import { pollUntil } from "../support/poll.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { WebhookReceiver } from "../support/webhook-receiver.js";
import { isSignedWith, SUBSCRIPTIONS, waitForState } from "../support/webhooks.js";

// Subscriptions, the registration challenge, signed delivery of licensing events, retries and request-forgery
// refusals, against a receiver on 127.0.0.1 (the only trusted target): no traffic leaves loopback.

interface Context {
  servers: Record<string, TestServer>;
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

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-webhooks-"));
  t.context.servers = {};
  for (const mode of MODES) {
    const embedded = mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {};
    t.context.servers[mode] = await startTestServer({ ...embedded, env: ENV, webhooks: { random: () => 0.5 } });
  }
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** A receiver and a subscription to it, verified (Active). */
async function activeSubscription(server: TestServer, request: Record<string, unknown> = {}) {
  const receiver = await WebhookReceiver.start();
  const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, {
    url: receiver.url(),
    eventTypes: ["Entitlement.*"],
    ...request,
  });
  if (created.status !== 200) throw new Error(`subscription: ${JSON.stringify(created.body)}`);
  receiver.secret = created.body.secret;
  const id = created.body.subscription.id as string;
  await waitForState(server, id, 2);
  return { receiver, id, secret: created.body.secret as string, created: created.body };
}

/** The subscription's delivery of this event once it is recorded as succeeded (after the receiver answered). */
async function succeededDelivery(server: TestServer, subscriptionId: string, eventId: string) {
  for (let tries = 0; tries < 200; tries++) {
    const listed = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${subscriptionId}/deliveries?status=2`);
    const found = listed.body.items.find((item: { eventId: string }) => item.eventId === eventId);
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`event ${eventId} was never recorded as delivered`);
}

each("a new subscription answers its secret once, is verified by the challenge and becomes Active", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, id, secret, created } = await activeSubscription(server);
  try {
    t.regex(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    t.is(created.subscription.state, 1, "PendingVerification until the challenge is answered");
    t.is(created.subscription.timestampFormat, "rfc3339");
    const challenge = receiver.received[0];
    t.is(challenge.envelope.type, "Webhooks.Registration.Challenge");
    t.true(isSignedWith(challenge, secret), "the challenge is signed");
    const got = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`);
    t.false(JSON.stringify(got.body).includes(secret), "the secret is never shown again");
  } finally {
    await receiver.close();
  }
});

each(
  "a reply that does not echo the challenge leaves the subscription pending; Verify sends another",
  async (t, mode) => {
    const server = t.context.servers[mode];
    const receiver = await WebhookReceiver.start();
    try {
      receiver.answer = () => ({ status: 200, body: '{"challenge":"wrong"}' });
      const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, {
        url: receiver.url(),
        eventTypes: ["*"],
      });
      t.is(created.status, 200, JSON.stringify(created.body));
      receiver.secret = created.body.secret;
      const id = created.body.subscription.id;
      await receiver.waitFor(() => true);
      await new Promise((resolve) => setTimeout(resolve, 300));
      t.is((await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`)).body.state, 1);
      receiver.answer = (received) => receiver.challengeReply(received) ?? { status: 204 };
      const verify = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/verify`, {});
      t.is(verify.status, 200, JSON.stringify(verify.body));
      await waitForState(server, id, 2);
      const again = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/verify`, {});
      t.is(again.status, 409, "an Active subscription needs no challenge");
    } finally {
      await receiver.close();
    }
  },
);

each("licensing changes arrive signed, as CloudEvents, with the spec's headers", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, secret } = await activeSubscription(server);
  try {
    const policy = { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: true, leaseTime: "00:10:00" } };
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
    const license = await activate(server.baseUrl, { activationCode: code, fingerprint: "device-1" });
    t.is(license.status, 200);
    const refused = await activate(server.baseUrl, { activationCode: code, fingerprint: "device-2" });
    t.is(refused.status, 409, "no seat left: this activation rolls back");
    await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, { isRevoked: true });

    const activated = await receiver.waitFor((received) => received.envelope.type === "Entitlement.Activated");
    const planned = await receiver.waitFor((received) => received.envelope.type === "Entitlement.PlanApplied");
    const cancelled = await receiver.waitFor((received) => received.envelope.type === "Entitlement.Cancelled");
    for (const received of [activated, planned, cancelled]) {
      t.true(isSignedWith(received, secret), `${received.envelope.type} is signed`);
      t.is(received.headers["webhook-event-type"], received.envelope.type);
      t.is(received.headers["webhook-id"], String(received.envelope.id));
      t.is(received.headers["webhook-delivery-attempt"], "1");
      t.regex(String(received.headers["webhook-timestamp"]), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      t.is(received.envelope.specversion, "1.0");
      t.is(received.envelope.source, `urn:provision:provider:${"00000000-0000-4000-8000-000000000000"}`);
      t.is(received.envelope.entitykind, "entitlement");
      t.is(received.envelope.entityid, entitlementId);
      t.is(received.envelope.datacontenttype, "application/json");
    }
    t.deepEqual(Object.keys(activated.envelope), [
      "specversion",
      "id",
      "source",
      "type",
      "time",
      "subject",
      "datacontenttype",
      "entitykind",
      "entityid",
      "eventversion",
      "data",
    ]);
    t.is(activated.envelope.data.sessionId, sessionIdOf(license.body.licenseToken));
    t.is(activated.envelope.data.fingerprint, "device-1");
    t.is(planned.envelope.data.cause, "created");
    t.is(cancelled.envelope.data.reason, "revoked");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const activations = receiver.received.filter((received) => received.envelope.type === "Entitlement.Activated");
    t.is(activations.length, 1, "the refused activation sent nothing");
  } finally {
    await receiver.close();
  }
});

each("a subscription with timestampFormat unix is verified by the standardwebhooks package", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, secret, created } = await activeSubscription(server, { timestampFormat: "unix" });
  try {
    t.is(created.subscription.timestampFormat, "unix");
    await entitlementWithCode(server.baseUrl, {});
    const planned = await receiver.waitFor((received) => received.envelope.type === "Entitlement.PlanApplied");
    const headers = Object.fromEntries(
      ["webhook-id", "webhook-timestamp", "webhook-signature"].map((name) => [name, String(planned.headers[name])]),
    );
    t.regex(headers["webhook-timestamp"], /^\d{10}$/);
    const payload = new Webhook(secret).verify(planned.body.toString("utf8"), headers) as { type: string };
    t.is(payload.type, "Entitlement.PlanApplied");
    t.throws(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 7).toString("base64")}`).verify(planned.body.toString(), headers),
    );
  } finally {
    await receiver.close();
  }
});

each("failed attempts are retried on the schedule and audited; 410 disables the subscription", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, id } = await activeSubscription(server);
  try {
    let failures = 0;
    receiver.answer = (received) =>
      received.envelope.type === "Entitlement.PlanApplied" && failures++ < 2
        ? { status: 500, body: "try later" }
        : { status: 204 };
    await entitlementWithCode(server.baseUrl, {});
    const third = await receiver.waitFor((received) => received.headers["webhook-delivery-attempt"] === "3");
    const first = receiver.received.find(
      (received) => received.envelope.id === third.envelope.id && received.headers["webhook-delivery-attempt"] === "1",
    );
    t.truthy(first, "the same event, attempt 1");
    const delivery = await succeededDelivery(server, id, String(third.envelope.id));
    const detail = await rest(server.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${delivery.id}`);
    t.is(detail.status, 200);
    t.deepEqual(
      detail.body.attempts.map((attempt: { statusCode: number }) => attempt.statusCode),
      [500, 500, 204],
    );
    t.is(detail.body.attempts[0].responseBody, "try later");
    t.is(JSON.parse(detail.body.payload).id, third.envelope.id);

    receiver.answer = () => ({ status: 410 });
    await entitlementWithCode(server.baseUrl, {});
    await waitForState(server, id, 3);
    t.pass("Disabled after 410 Gone");
  } finally {
    await receiver.close();
  }
});

each("a 410 Gone answering the challenge disables the subscription too", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  try {
    receiver.answer = () => ({ status: 410 });
    const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: receiver.url(), eventTypes: ["*"] });
    t.is(created.status, 200);
    await waitForState(server, created.body.subscription.id, 3);
  } finally {
    await receiver.close();
  }
});

each("a 410 from the url a subscription had before it was moved disables nothing", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, id } = await activeSubscription(server);
  const moved = await WebhookReceiver.start();
  try {
    let release = () => {};
    receiver.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    receiver.answer = () => ({ status: 410 });
    await entitlementWithCode(server.baseUrl, {});
    const event = await receiver.waitFor((received) => received.envelope.type === "Entitlement.PlanApplied");
    moved.secret = receiver.secret;
    const changed = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { url: moved.url("/moved") });
    t.is(changed.status, 200, JSON.stringify(changed.body));
    release();
    await waitForState(server, id, 2);
    const resent = await moved.waitFor((received) => received.envelope.id === event.envelope.id);
    t.truthy(resent, "the event the old url answered 410 goes to the new one once it is verified");
    t.is((await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`)).body.state, 2, "still Active");
  } finally {
    await receiver.close();
    await moved.close();
  }
});

each("a Retry-After on a failed answer makes the next attempt wait at least that long", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver } = await activeSubscription(server);
  try {
    const arrivals: number[] = [];
    receiver.answer = (received) => {
      if (received.envelope.type !== "Entitlement.PlanApplied") return { status: 204 };
      arrivals.push(Date.now());
      return arrivals.length === 1 ? { status: 503, headers: { "retry-after": "2" } } : { status: 204 };
    };
    await entitlementWithCode(server.baseUrl, {});
    await receiver.waitFor((received) => received.headers["webhook-delivery-attempt"] === "2", 15_000);
    t.true(arrivals[1] - arrivals[0] >= 1900, `waited ${arrivals[1] - arrivals[0]} ms (the schedule says 200 ms)`);
  } finally {
    await receiver.close();
  }
});

each("test-fire sends a sample with data._test through the pipeline", async (t, mode) => {
  const server = t.context.servers[mode];
  const { receiver, id, secret } = await activeSubscription(server);
  try {
    const fired = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/test-fire`, {
      eventType: "Entitlement.Renewed",
    });
    t.is(fired.status, 200, JSON.stringify(fired.body));
    const sample = await receiver.waitFor((received) => received.envelope.id === fired.body.eventId);
    t.true(isSignedWith(sample, secret));
    t.is(sample.envelope.type, "Entitlement.Renewed");
    t.is(Object.keys(sample.envelope.data)[0], "_test");
    t.is(sample.envelope.data._test, true);
    const entitlementId = String(sample.envelope.data.entitlementId);
    t.regex(entitlementId, /^[0-9a-f-]{36}$/, "the sample names its entitlement as a real event does");
    t.is(sample.envelope.subject, `entitlements/${entitlementId}`);
    t.is(sample.envelope.entityid, entitlementId);
    const usage = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/test-fire`, {
      eventType: "MeteredUsage.OverageStatusChanged",
    });
    const usageSample = await receiver.waitFor((received) => received.envelope.id === usage.body.eventId);
    const { data } = usageSample.envelope;
    t.regex(String(data.assetId), /^[0-9a-f-]{36}$/);
    t.is(usageSample.envelope.subject, `entitlements/${data.entitlementId}/assets/${data.assetId}`);
    t.is(usageSample.envelope.entityid, data.assetId);
  } finally {
    await receiver.close();
  }
});

each("endpoints that are not allowed are refused before any connection", async (t, mode) => {
  const server = t.context.servers[mode];
  const bystander = await WebhookReceiver.start("127.0.0.2");
  try {
    const port = bystander.port;
    for (const url of [
      `http://127.0.0.2:${port}/hook`,
      `https://127.0.0.2:${port}/hook`,
      `http://0.0.0.0:${port}/hook`,
      `http://[::1]:${port}/hook`,
      `http://[::ffff:127.0.0.2]:${port}/hook`,
      `http://2130706434:${port}/hook`,
      `http://user:pass@127.0.0.1:${port}/hook`,
      `ftp://127.0.0.1:${port}/hook`,
      "not a url",
    ]) {
      const refused = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url, eventTypes: ["*"] });
      t.is(refused.status, 400, url);
      t.true(
        refused.body.errors?.some((error: { field: string }) => error.field === "url"),
        JSON.stringify(refused.body),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.is(bystander.received.length, 0, "nothing reached 127.0.0.2");
  } finally {
    await bystander.close();
  }
});

each("a URL longer than its column is refused, as normalized, on create and on update", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  try {
    const base = receiver.url();
    const longest = `${base}${"x".repeat(2048 - base.length)}`;
    const made = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: longest, eventTypes: ["*"] });
    t.is(made.status, 200, JSON.stringify(made.body));
    for (const url of [`${longest}x`, `${base}${"é".repeat(400)}`]) {
      for (const [method, path] of [
        ["POST", SUBSCRIPTIONS],
        ["PATCH", `${SUBSCRIPTIONS}/${made.body.subscription.id}`],
      ]) {
        const refused = await rest(server.baseUrl, method, path, { url, eventTypes: ["*"] });
        t.is(refused.status, 400, `${method} ${url.length}: ${JSON.stringify(refused.body)}`);
        t.deepEqual(
          refused.body.errors?.map((error: { field: string }) => error.field),
          ["url"],
        );
      }
    }
  } finally {
    await receiver.close();
  }
});

each("event types, callback scopes and another provider's subscriptions", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  try {
    const unknown = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: receiver.url(), eventTypes: ["Nope.*"] });
    t.is(unknown.status, 400);
    const deleting = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, {
      url: receiver.url(),
      eventTypes: ["*"],
      callbackScopes: ["catalog:delete"],
    });
    t.is(deleting.status, 400);
    const missing = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/00000000-0000-4000-8000-00000000abcd`);
    t.is(missing.status, 404);
    const schemas = await rest(server.baseUrl, "GET", "/api/v1/webhooks/schemas", undefined, { authorization: "" });
    t.is(schemas.status, 200);
    const types = schemas.body.eventSchemas.map((schema: { type: string }) => schema.type);
    t.true(types.includes("Entitlement.Activated"));
  } finally {
    await receiver.close();
  }
});

each(
  "events during a re-verification after a URL change wait and go once the new endpoint is verified",
  async (t, mode) => {
    const server = t.context.servers[mode];
    const { receiver, id, secret } = await activeSubscription(server);
    const moved = await WebhookReceiver.start();
    try {
      moved.secret = secret;
      moved.answer = () => ({ status: 503 });
      const changed = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { url: moved.url("/moved") });
      t.is(changed.status, 200, JSON.stringify(changed.body));
      t.is(changed.body.state, 1, "PendingVerification at the new URL");
      const { entitlementId } = await entitlementWithCode(server.baseUrl, {});
      await new Promise((resolve) => setTimeout(resolve, 400));
      const early = moved.received.filter((received) => received.envelope.type !== "Webhooks.Registration.Challenge");
      t.is(early.length, 0, "nothing but the challenge before the new endpoint is verified");
      moved.answer = (received) => moved.challengeReply(received) ?? { status: 204 };
      t.is((await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/verify`, {})).status, 200);
      await waitForState(server, id, 2);
      const planned = await moved.waitFor(
        (received) =>
          received.envelope.type === "Entitlement.PlanApplied" && received.envelope.entityid === entitlementId,
      );
      t.true(isSignedWith(planned, secret));
      t.false(
        receiver.received.some((received) => received.envelope.entityid === entitlementId),
        "not to the old URL",
      );
    } finally {
      await moved.close();
      await receiver.close();
    }
  },
);

each("a failed challenge is not requeued; a Disabled subscription given a new URL stays Disabled", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const moved = await WebhookReceiver.start();
  try {
    receiver.answer = () => ({ status: 500 });
    const created = await rest(server.baseUrl, "POST", SUBSCRIPTIONS, { url: receiver.url(), eventTypes: ["*"] });
    const id = created.body.subscription.id as string;
    moved.secret = created.body.secret;
    const failed = await pollUntil("the failed challenge", async () => {
      const listed = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries?status=3`);
      return listed.body.items[0];
    });
    const requeued = await rest(server.baseUrl, "POST", `/api/v1/webhooks/admin/deliveries/${failed.id}/requeue`, {});
    t.is(requeued.status, 409, JSON.stringify(requeued.body));
    t.is(requeued.body.type, "urn:provision:problem:challenge-not-requeued");
    const all = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/requeue-failed`, {});
    t.is(all.body.requeued, 0);

    t.is((await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { state: 3 })).body.state, 3);
    const changed = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { url: moved.url() });
    t.is(changed.status, 200, JSON.stringify(changed.body));
    t.is(changed.body.state, 3, "still Disabled");
    const pending = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}/deliveries?status=1`);
    t.is(pending.body.totalCount, 0, "no challenge queued");
    t.is((await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { state: 2 })).body.state, 1);
    await waitForState(server, id, 2);
    t.is(moved.received[0]?.envelope.type, "Webhooks.Registration.Challenge", "enabling it challenged the new URL");
    const emptied = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, { updateMask: "eventTypes" });
    t.deepEqual(emptied.body.errors, [{ field: "eventTypes", message: "cannot be emptied" }]);
    const challenge = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/test-fire`, {
      eventType: "Webhooks.Registration.Challenge",
    });
    t.regex(challenge.body.errors[0].message, /verify/);
  } finally {
    await receiver.close();
    await moved.close();
  }
});
