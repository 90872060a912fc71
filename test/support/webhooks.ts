import { randomUUID } from "node:crypto";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { WebhookSubscriptionEntity } from "../../src/webhooks/entities.js";
import { rest } from "./rest.js";
import type { TestServer } from "./test-server.js";
import { type Received, sign } from "./webhook-receiver.js";

export const SUBSCRIPTIONS = "/api/v1/webhooks/admin/subscriptions";

/** Waits until the subscription is in `state` (it changes as its endpoint answers); answers it. */
export async function waitForState(server: Pick<TestServer, "baseUrl">, id: string, state: number) {
  for (let tries = 0; tries < 400; tries++) {
    const found = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`);
    if (found.body.state === state) return found.body;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`subscription ${id} never reached state ${state}`);
}

/** Whether one of the delivery's v1 signatures is the one `secret` makes (computed independently of the service). */
export function isSignedWith(received: Received, secret: string): boolean {
  const id = String(received.headers["webhook-id"]);
  const timestamp = String(received.headers["webhook-timestamp"]);
  return String(received.headers["webhook-signature"])
    .split(" ")
    .includes(`v1,${sign(secret, id, timestamp, received.body)}`);
}

/**
 * Waits until no delivery is out under a claim. A claim lasts until a time on the service's clock, so a test that
 * moves a manual clock past it while a delivery is in flight would see that delivery claimed and sent again.
 */
export async function waitForNoClaimedDelivery(server: Pick<TestServer, "app">) {
  for (let tries = 0; tries < 400; tries++) {
    const [row] = (await server.app.dataSource.query(
      "SELECT COUNT(*) AS claimed FROM webhook_deliveries WHERE claim_id IS NOT NULL",
    )) as { claimed: number | string }[];
    if (Number(row.claimed) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error("a delivery stayed claimed for 10 s");
}

/**
 * A Suspended subscription of the default provider that asks for no event type: the outbox keeps that provider's
 * broadcast events (it writes none for a provider without a receiving subscription), and none is delivered. For
 * tests that read the outbox themselves.
 */
export async function keepOutboxEvents(server: Pick<TestServer, "app">): Promise<void> {
  await insertSubscription(server, { state: SubscriptionState.SUSPENDED });
}

/** A subscription row written directly (no challenge is sent), asking for no event type; answers its id. */
export async function insertSubscription(
  server: Pick<TestServer, "app">,
  row: { state: SubscriptionState; providerId?: string; verified?: boolean; deleted?: boolean },
): Promise<string> {
  const now = new Date();
  const id = randomUUID();
  await server.app.dataSource.getRepository(WebhookSubscriptionEntity).insert({
    id,
    providerId: row.providerId ?? DEFAULT_PROVIDER_ID,
    url: "https://127.0.0.1:9/parked",
    eventTypes: "[]",
    filter: null,
    callbackScopes: "[]",
    callbackClientId: "",
    state: row.state,
    description: "written by a test",
    timestampFormat: "rfc3339",
    secret: "",
    previousSecret: null,
    previousSecretExpiresAt: null,
    challengeDeliveryId: null,
    failingSince: null,
    verifiedAt: row.verified === false ? null : now,
    deletedAt: row.deleted ? now : null,
    createdAt: now,
    updatedAt: now,
  });
  return id;
}
