import { randomBytes } from "node:crypto";
import { accessToken } from "../test/support/auth.js";
import { ENTITLEMENTS } from "../test/support/licensing.js";
import { PRODUCTS } from "../test/support/rest.js";
import { call } from "./catalog-fixture.js";
import { type OutboxCopies, openOutboxCopies } from "./outbox-copies.js";
import { createStorage, type Mode, type RunningProvision, startProvision } from "./provision-server.js";
import { type BenchReceiver, startBenchReceiver } from "./webhook-receiver.js";

const SUBSCRIPTIONS_PATH = "/api/v1/webhooks/admin/subscriptions";
/** Plain http to the receiver on 127.0.0.1, which the request-forgery rules refuse otherwise. */
const TRUSTED = { WEBHOOK_TRUSTED_TARGETS: "127.0.0.1" };
const ACTIVE = 2;

/**
 * A service of its own for the webhook rows (fresh storage, so their outbox and deliveries slow no other row),
 * the receiver, one entitlement whose seat count the rows change, and `secretCount` subscription secrets made
 * here (sent with each subscription, so the receiver knows them before any challenge arrives).
 */
export interface WebhookBench {
  provision: RunningProvision;
  receiver: BenchReceiver;
  outbox: OutboxCopies;
  secrets: string[];
  /** Subscribes endpoint n (secret n) to every `Entitlement.*` event, for each n; waits until all are Active. */
  subscribe(indexes: number[]): Promise<void>;
  /** A seat count never set before: setting it changes the entitlement's plan (one PlanApplied event). */
  nextSeats(): number;
  /** The REST PUT (SetClaimBasedSeats) setting the entitlement's seat count. */
  seatsRequest(seats: number): { path: string; headers: Record<string, string>; body: string };
  /** Sets the next seat count: one PlanApplied event, which also wakes the delivery worker at once. */
  changeSeats(): Promise<void>;
  /** Waits until every event is matched and every delivery is sent and recorded. */
  settle(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the receiver and the service (pinned like the other rows' processes) and seeds the entitlement. */
export async function startWebhookBench(
  mode: Mode,
  secretCount: number,
  logLevel: string,
  main?: string[],
): Promise<WebhookBench> {
  const secrets = Array.from({ length: secretCount }, () => `whsec_${randomBytes(32).toString("base64")}`);
  const receiver = await startBenchReceiver(secrets);
  const storage = await createStorage(mode);
  const stopped: Array<() => Promise<void>> = [() => storage.remove(), () => receiver.stop()];
  const stop = async () => {
    for (const step of stopped.reverse()) await step();
  };
  try {
    const provision = await startProvision(
      { ...storage, env: { ...storage.env, ...TRUSTED } },
      logLevel,
      undefined,
      main,
    );
    stopped.push(() => provision.stop());
    const outbox = openOutboxCopies(storage.databaseUrl);
    stopped.push(() => outbox.close());
    const { clientId, clientSecret } = provision.admin;
    const authorization = `Bearer ${await accessToken(provision.baseUrl, clientId, clientSecret)}`;
    const send: Send = (method, path, body) => call(provision.baseUrl, authorization, method, path, body);
    const entitlementId = await benchEntitlement(send);
    const seatsRequest = (seats: number) => ({
      path: `/api/v1/provision/operational/entitlement/entitlements/${entitlementId}/policies/claim-based/seats`,
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ numberOfSeats: seats }),
    });
    let lastSeats = 1;
    const nextSeats = () => ++lastSeats;
    return {
      provision,
      receiver,
      outbox,
      secrets,
      subscribe: (indexes) => subscribe(send, receiver, secrets, indexes),
      nextSeats,
      seatsRequest,
      async changeSeats() {
        const { path, body } = seatsRequest(nextSeats());
        await send("PUT", path, JSON.parse(body));
      },
      settle: (timeoutMs = 120_000) => settled(outbox, timeoutMs),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function subscribe(send: Send, receiver: BenchReceiver, secrets: string[], indexes: number[]) {
  const ids: string[] = [];
  for (const index of indexes) {
    const request = { url: receiver.hookUrl(index), eventTypes: ["Entitlement.*"], secret: secrets[index] };
    ids.push((await send("POST", SUBSCRIPTIONS_PATH, request)).subscription.id);
  }
  for (const id of ids) await waitUntilActive(send, id);
}

type Send = (method: string, path: string, body: unknown) => ReturnType<typeof call>;

async function benchEntitlement(send: Send): Promise<string> {
  const product = await send("POST", PRODUCTS, { productCode: "BENCH-HOOKS", productVersion: "1", name: "Hooks" });
  const entitlement = await send("POST", ENTITLEMENTS, {
    name: "Webhook bench customer",
    productIds: [product.id],
    activationPolicy: { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: true, leaseTime: "01:00:00" } },
  });
  return entitlement.id;
}

async function waitUntilActive(send: Send, id: string, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const subscription = await send("GET", `${SUBSCRIPTIONS_PATH}/${id}`, undefined);
    if (subscription.state === ACTIVE) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`subscription ${id} did not become Active within ${timeoutMs} ms (registration challenge)`);
}

async function settled(outbox: OutboxCopies, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await outbox.unsettled()) > 0) {
    if (performance.now() > deadline) throw new Error(`webhook deliveries still pending after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
