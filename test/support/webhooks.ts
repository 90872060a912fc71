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
