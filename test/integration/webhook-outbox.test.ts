import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import { ensureCompiled } from "../support/compiled-build.js";
import { ENTITLEMENTS } from "../support/licensing.js";
import { pollUntil } from "../support/poll.js";
import { type ProvisionProcess, spawnProvision } from "../support/provision-process.js";
import { type OwnRedis, startOwnRedis } from "../support/redis-server.js";
import { defaultAuthorization, PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";
import { type Received, sign, WebhookReceiver } from "../support/webhook-receiver.js";
import { isSignedWith, SUBSCRIPTIONS } from "../support/webhooks.js";

// The transactional outbox: events survive an endpoint that is down, a service killed (SIGKILL) between the
// change and the delivery, and go out exactly once per subscription from several processes sharing MySQL and
// Redis; a change that rolls back sends nothing. Every endpoint is on 127.0.0.1, the only trusted target.

interface Context {
  servers: Record<Mode, TestServer>;
  folder: string;
  redis: OwnRedis;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const ENV = {
  WEBHOOK_TRUSTED_TARGETS: "127.0.0.1",
  WEBHOOK_RETRY_SCHEDULE: "0s,200ms,400ms,800ms,1600ms,3200ms",
  WEBHOOK_POLL_INTERVAL_MS: "100",
};
/**
 * A claim outlives the request time-out by 30 s (delivery-worker.ts): a dead instance's claim expires then. The
 * time-out leaves the test time to kill the process before it gives up on the held request by itself.
 */
const TIMEOUT_MS = 2000;
const CLAIM_MARGIN_MS = 30_000;

test.before(async (t) => {
  t.timeout(300_000, "building the compiled service");
  ensureCompiled();
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-webhook-outbox-"));
  t.context.redis = await startOwnRedis();
  t.context.servers = {} as Context["servers"];
  for (const mode of MODES) {
    const embedded = mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {};
    t.context.servers[mode] = await startTestServer({ ...embedded, env: ENV, webhooks: { random: () => 0.5 } });
  }
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  await t.context.redis?.stop();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** A subscription to every Entitlement event at `url`, once its endpoint has answered the challenge. */
async function activeSubscription(baseUrl: string, url: string, setSecret: (secret: string) => void) {
  const created = await rest(baseUrl, "POST", SUBSCRIPTIONS, { url, eventTypes: ["Entitlement.*"] });
  if (created.status !== 200) throw new Error(`subscription: ${JSON.stringify(created.body)}`);
  setSecret(created.body.secret);
  const id = created.body.subscription.id as string;
  await pollUntil(`subscription ${id} Active`, async () => {
    const found = await rest(baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`);
    return found.body.state === 2 || undefined;
  });
  return { id, secret: created.body.secret as string };
}

async function newProduct(baseUrl: string): Promise<string> {
  const code = `OUT-${randomBytes(4).toString("hex")}`;
  const product = await rest(baseUrl, "POST", PRODUCTS, { productCode: code, productVersion: "1", name: code });
  if (product.status !== 200) throw new Error(`product: ${JSON.stringify(product.body)}`);
  return product.body.id;
}

/** A new entitlement (its creation emits Entitlement.PlanApplied); answers its id. */
async function newEntitlement(baseUrl: string, productId: string): Promise<string> {
  const created = await rest(baseUrl, "POST", ENTITLEMENTS, { name: "Outbox", productIds: [productId] });
  if (created.status !== 200) throw new Error(`entitlement: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body.id;
}

/** A subscription's deliveries (one page of up to 100), newest first. */
async function deliveriesOf(baseUrl: string, subscriptionId: string) {
  const listed = await rest(baseUrl, "GET", `${SUBSCRIPTIONS}/${subscriptionId}/deliveries?pageSize=100`);
  if (listed.status !== 200) throw new Error(`deliveries: ${JSON.stringify(listed.body)}`);
  return listed.body.items as { id: string; eventId: string; status: number; attemptCount: number }[];
}

/** The attempts recorded (completed) for a delivery. */
async function recordedAttempts(baseUrl: string, deliveryId: string): Promise<number> {
  const detail = await rest(baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${deliveryId}`);
  if (detail.status !== 200) throw new Error(`delivery: ${JSON.stringify(detail.body)}`);
  return (detail.body.attempts as unknown[]).length;
}

function planAppliedFor(entitlementId: string) {
  return (received: Received) =>
    received.envelope.type === "Entitlement.PlanApplied" && received.envelope.entityid === entitlementId;
}

each("an endpoint down, then up again on the same port, gets every event", async (t, mode) => {
  const server = t.context.servers[mode];
  const first = await WebhookReceiver.start();
  const port = first.port;
  const { id, secret } = await activeSubscription(server.baseUrl, first.url(), (value) => {
    first.secret = value;
  });
  let second: WebhookReceiver | undefined;
  try {
    await first.close();
    const productId = await newProduct(server.baseUrl);
    const entitlementIds = [];
    for (let index = 0; index < 3; index++) entitlementIds.push(await newEntitlement(server.baseUrl, productId));
    // Two attempts recorded as failed, not merely claimed: an attempt counts when it is claimed, so a second one
    // still on its way could reach the receiver started below.
    await pollUntil("every event to have failed twice while the endpoint is down", async () => {
      const pending = (await deliveriesOf(server.baseUrl, id)).filter((delivery) => delivery.status === 1);
      if (pending.length !== 3 || pending.some((delivery) => delivery.attemptCount < 2)) return undefined;
      const failedAttempts = await Promise.all(
        pending.map((delivery) => recordedAttempts(server.baseUrl, delivery.id)),
      );
      return failedAttempts.every((count) => count >= 2) ? true : undefined;
    });

    second = await WebhookReceiver.start("127.0.0.1", port);
    second.secret = secret;
    for (const entitlementId of entitlementIds) {
      const received = await second.waitFor(planAppliedFor(entitlementId), 15_000);
      t.true(isSignedWith(received, secret), "signed");
      t.true(Number(received.headers["webhook-delivery-attempt"]) >= 3, "a retry after the failed attempts");
    }
    const settled = await pollUntil("every delivery recorded as succeeded", async () => {
      const deliveries = await deliveriesOf(server.baseUrl, id);
      return deliveries.every((delivery) => delivery.status === 2) ? deliveries : undefined;
    });
    const events = settled.filter((delivery) => delivery.attemptCount > 1);
    t.is(events.length, 3, "the three events, each retried");
    for (const delivery of events) {
      const detail = await rest(server.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${delivery.id}`);
      const attempts = detail.body.attempts as { statusCode: number; error: string }[];
      t.is(attempts[0].statusCode, 0, "no answer while down");
      t.not(attempts[0].error, "");
      t.is(attempts.at(-1)?.statusCode, 204);
    }
  } finally {
    await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`);
    await second?.close();
  }
});

each("a change that rolls back after writing its event sends nothing", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const { id } = await activeSubscription(server.baseUrl, receiver.url(), (value) => {
    receiver.secret = value;
  });
  try {
    const source = await newEntitlement(server.baseUrl, await newProduct(server.baseUrl));
    const template = await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
      entitlementId: source,
      templateName: `Rollback ${randomBytes(4).toString("hex")}`,
      templateVersion: "1",
    });
    t.is(template.status, 200, JSON.stringify(template.body));
    const templateId = template.body.id as string;
    const eventsOfTemplate = async () =>
      (await server.app.dataSource.query("SELECT id FROM webhook_events WHERE payload LIKE ?", [
        `%${templateId}%`,
      ])) as unknown[];

    // The entitlement and its PlanApplied event are written before the invitation is checked, in one transaction.
    const refused = await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/from-template`, {
      entitlementTemplateId: templateId,
      licenseActivationWorkflowParameters: { email: "not an email" },
    });
    t.is(refused.status, 400, JSON.stringify(refused.body));
    t.deepEqual(await eventsOfTemplate(), [], "no event left in the outbox");

    const made = await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/from-template`, {
      entitlementTemplateId: templateId,
      licenseActivationWorkflowParameters: { email: "user@example.test" },
    });
    t.is(made.status, 200, JSON.stringify(made.body));
    const delivered = await receiver.waitFor(planAppliedFor(made.body.entitlement.id));
    t.like(delivered.envelope.data, { cause: "from-template", templateId });
    t.is((await eventsOfTemplate()).length, 1, "the committed change's event, found by the same query");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const fromTemplate = receiver.received.filter((received) => received.envelope.data.templateId === templateId);
    t.is(fromTemplate.length, 1, "only the committed change was sent");
  } finally {
    await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`);
    await receiver.close();
  }
});

interface Instance {
  process: ProvisionProcess;
  baseUrl: string;
}

/** Processes of the compiled service on one MySQL database and this file's Redis, as a bootstrap client. */
async function cluster(t: ExecutionContext<Context>, extraEnv: Record<string, string> = {}) {
  const database = await createTestDatabase();
  const admin = { id: `outbox-${randomBytes(6).toString("hex")}`, secret: randomBytes(32).toString("base64url") };
  const env = {
    ...ENV,
    ...extraEnv,
    DATABASE_URL: database.url,
    REDIS_URL: t.context.redis.url,
    LOG_LEVEL: "info",
    HOST: "127.0.0.1",
    PORT: "0",
    PROVISION_BOOTSTRAP_CLIENT_ID: admin.id,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: admin.secret,
    TOKEN_RATE_LIMIT_PER_ADDRESS: "100000",
    ACTIVATION_RATE_LIMIT_PER_ADDRESS: "100000",
  };
  const instances: Instance[] = [];
  return {
    instances,
    /** Starts one more process; answers once it serves, with `rest()` authorized on it. */
    async start(): Promise<Instance> {
      const child = spawnProvision(env);
      try {
        const listening = await child.waitForLog((record) => record.msg === "provision is listening", 30_000);
        const baseUrl = `http://127.0.0.1:${listening.port}`;
        defaultAuthorization.set(baseUrl, `Bearer ${await accessToken(baseUrl, admin.id, admin.secret)}`);
        const instance = { process: child, baseUrl };
        instances.push(instance);
        return instance;
      } catch (error) {
        child.kill();
        throw error;
      }
    },
    async stop() {
      for (const instance of instances) instance.process.kill();
      await Promise.all(instances.map((instance) => instance.process.exited));
      await database.drop();
    },
  };
}

interface Arrival {
  received: Received;
  at: number;
  answered: boolean;
}

/**
 * An endpoint on 127.0.0.1 that answers the registration challenge and, while `holding`, never answers an event
 * (the request stays open); once released it answers events 204.
 */
async function holdingEndpoint() {
  const arrivals: Arrival[] = [];
  const state = { secret: "", holding: true };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      const received = { headers: request.headers, body, envelope: JSON.parse(body.toString("utf8")) };
      const arrival = { received, at: Date.now(), answered: false };
      arrivals.push(arrival);
      if (received.envelope.type === "Webhooks.Registration.Challenge") {
        const reply = JSON.stringify({ challenge: received.envelope.data.challenge });
        const id = String(request.headers["webhook-id"]);
        const timestamp = String(request.headers["webhook-timestamp"]);
        response.writeHead(200, { "webhook-signature": `v1,${sign(state.secret, id, timestamp, Buffer.from(reply))}` });
        response.end(reply);
        return;
      }
      if (state.holding) return;
      arrival.answered = true;
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    arrivals,
    state,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    of: (eventId: string) => arrivals.filter((arrival) => arrival.received.headers["webhook-id"] === eventId),
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The outbox event id of an entitlement's PlanApplied event, read from the subscription's deliveries. */
async function eventIdFor(baseUrl: string, subscriptionId: string, entitlementId: string): Promise<string> {
  return pollUntil(`the event of ${entitlementId}`, async () => {
    for (const delivery of await deliveriesOf(baseUrl, subscriptionId)) {
      const detail = await rest(baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${delivery.id}`);
      if (JSON.parse(detail.body.payload).entityid === entitlementId) return delivery.eventId;
    }
    return undefined;
  });
}

test.serial(
  "kill -9 between the change and its delivery: a new process delivers after the claim expires",
  async (t) => {
    t.timeout(90_000);
    const processes = await cluster(t, { WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });
    const endpoint = await holdingEndpoint();
    try {
      const victim = await processes.start();
      const { id } = await activeSubscription(victim.baseUrl, endpoint.url, (value) => {
        endpoint.state.secret = value;
      });
      const productId = await newProduct(victim.baseUrl);
      const inFlight = await newEntitlement(victim.baseUrl, productId);
      const held = await pollUntil("the first event's request, held open", () =>
        endpoint.arrivals.find((arrival) => arrival.received.envelope.entityid === inFlight),
      );
      const justCommitted = await newEntitlement(victim.baseUrl, productId);
      victim.process.kill();
      t.is((await victim.process.exited).signal, "SIGKILL");
      t.false(held.answered, "the endpoint never answered the dead process");
      endpoint.state.holding = false;

      const successor = await processes.start();
      const heldId = String(held.received.headers["webhook-id"]);
      const delivered = await pollUntil(
        "the held event delivered by the new process",
        () => endpoint.of(heldId).find((arrival) => arrival.answered),
        { timeoutMs: TIMEOUT_MS + CLAIM_MARGIN_MS + 10_000, intervalMs: 100 },
      );
      const lastHeld = Math.max(
        ...endpoint
          .of(heldId)
          .filter((arrival) => !arrival.answered)
          .map((arrival) => arrival.at),
      );
      t.true(
        delivered.at - lastHeld >= CLAIM_MARGIN_MS,
        `the dead process's claim is honoured until it expires (${delivered.at - lastHeld} ms)`,
      );
      t.is(delivered.received.body.toString(), held.received.body.toString(), "the same envelope");
      t.is(
        delivered.received.headers["webhook-delivery-attempt"],
        String(endpoint.of(heldId).length),
        "the attempt the process died in still counts",
      );

      // The outcome is recorded once the endpoint's answer is back: a moment after the endpoint sent it.
      const recordedSuccess = (eventId: string) =>
        pollUntil(`${eventId} recorded as succeeded`, async () =>
          (await deliveriesOf(successor.baseUrl, id)).find(
            (delivery) => delivery.eventId === eventId && delivery.status === 2,
          ),
        );
      const heldDelivery = await recordedSuccess(heldId);
      const audit = await rest(successor.baseUrl, "GET", `/api/v1/webhooks/admin/deliveries/${heldDelivery?.id}`);
      const attempts = audit.body.attempts as { attempt: number; error: string; statusCode: number }[];
      t.deepEqual(
        attempts.map((attempt) => attempt.attempt),
        Array.from({ length: heldDelivery?.attemptCount ?? 0 }, (_, index) => index + 1),
        "every attempt counted is in the audit, the dead process's too",
      );
      t.regex(attempts[attempts.length - 2].error, /^no outcome recorded before its claim expired/);
      t.is(attempts[attempts.length - 1].error, "", "and then the attempt that succeeded");

      const otherId = await eventIdFor(successor.baseUrl, id, justCommitted);
      await pollUntil(
        "the event committed just before the kill delivered",
        () => endpoint.of(otherId).some((arrival) => arrival.answered) || undefined,
      );
      // The event committed just before the kill is recorded as succeeded too (the poll fails the test otherwise).
      await recordedSuccess(otherId);
    } finally {
      await endpoint.close();
      await processes.stop();
    }
  },
);

test.serial("three processes deliver each of 60 events once to each subscription", async (t) => {
  t.timeout(90_000);
  const processes = await cluster(t);
  const receivers = [await WebhookReceiver.start(), await WebhookReceiver.start()];
  try {
    const first = await processes.start();
    const instances = [first, ...(await Promise.all([processes.start(), processes.start()]))];
    for (const [index, receiver] of receivers.entries()) {
      await activeSubscription(instances[index].baseUrl, receiver.url(), (value) => {
        receiver.secret = value;
      });
    }
    const productId = await newProduct(first.baseUrl);
    const entitlementIds = await Promise.all(
      Array.from({ length: 60 }, (_, index) => newEntitlement(instances[index % 3].baseUrl, productId)),
    );

    for (const receiver of receivers) {
      await pollUntil(
        "every event at the receiver",
        () =>
          entitlementIds.every((entitlementId) => receiver.received.some(planAppliedFor(entitlementId))) || undefined,
        { timeoutMs: 30_000, intervalMs: 50 },
      );
    }
    // Longer than a poll interval and the shortest retry: a duplicate claim would have arrived by now.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const webhookIds = receivers.map((receiver, index) => {
      const events = receiver.received.filter((received) => received.envelope.type === "Entitlement.PlanApplied");
      const ids = events.map((received) => String(received.headers["webhook-id"]));
      t.is(events.length, 60, `receiver ${index}: one request per event`);
      t.is(new Set(ids).size, 60, `receiver ${index}: no webhook-id twice`);
      const changed = events.map((received) => String(received.envelope.entityid));
      t.deepEqual(changed.sort(), [...entitlementIds].sort(), `receiver ${index}: every change`);
      const attempts = new Set(events.map((received) => received.headers["webhook-delivery-attempt"]));
      t.deepEqual([...attempts], ["1"], `receiver ${index}: each at its first attempt`);
      return ids.sort();
    });
    t.deepEqual(webhookIds[0], webhookIds[1], "both subscriptions got the same events");
  } finally {
    for (const receiver of receivers) await receiver.close();
    await processes.stop();
  }
});
