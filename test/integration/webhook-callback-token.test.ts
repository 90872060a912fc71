import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { decodeJwt } from "jose";
import { accessToken } from "../support/auth.js";
import { ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { createClient } from "../support/oauth-clients.js";
import { pollUntil } from "../support/poll.js";
import { type JsonResponse, PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";
import { type Received, WebhookReceiver } from "../support/webhook-receiver.js";

// Callback tokens: every delivery of a subscription with callback scopes (not its challenge) carries a
// `webhook-callback-token`, a short-lived access token with exactly those scopes, usable on the admin API.
// Scopes that delete, wildcards and scopes beyond the calling client's are refused. Receivers are on 127.0.0.1.

interface Context {
  servers: Record<string, TestServer>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const SUBSCRIPTIONS = "/api/v1/webhooks/admin/subscriptions";
const TOKEN_TTL_SECONDS = 120;
const ENV = {
  WEBHOOK_TRUSTED_TARGETS: "127.0.0.1",
  WEBHOOK_RETRY_SCHEDULE: "0s,200ms,400ms",
  WEBHOOK_POLL_INTERVAL_MS: "100",
  WEBHOOK_CALLBACK_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS),
};
const CALLBACK_TOKEN = "webhook-callback-token";

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-webhook-callback-"));
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

/** Creates a subscription to `receiver` as `authorization` (the bootstrap client's unless given). */
function createSubscription(
  server: TestServer,
  receiver: WebhookReceiver,
  request: Record<string, unknown>,
  authorization = server.adminAuthorization,
): Promise<JsonResponse> {
  return rest(
    server.baseUrl,
    "POST",
    SUBSCRIPTIONS,
    { url: receiver.url(), eventTypes: ["Entitlement.*"], ...request },
    { authorization },
  );
}

/** A subscription with these callback scopes, verified (Active). */
async function activeSubscription(
  server: TestServer,
  receiver: WebhookReceiver,
  callbackScopes: string[],
  authorization?: string,
) {
  const created = await createSubscription(server, receiver, { callbackScopes }, authorization);
  if (created.status !== 200) throw new Error(`subscription: ${JSON.stringify(created.body)}`);
  receiver.secret = created.body.secret;
  const id = created.body.subscription.id as string;
  await pollUntil(`subscription ${id} Active`, async () => {
    const found = await rest(server.baseUrl, "GET", `${SUBSCRIPTIONS}/${id}`);
    return found.body.state === 2 || undefined;
  });
  return id;
}

/** The PlanApplied delivery of a new entitlement. */
async function deliveredChange(server: TestServer, receiver: WebhookReceiver): Promise<Received> {
  const { entitlementId } = await entitlementWithCode(server.baseUrl, {});
  return receiver.waitFor(
    (received) => received.envelope.type === "Entitlement.PlanApplied" && received.envelope.entityid === entitlementId,
  );
}

/** Deletes the subscription (nothing more is sent to the receiver's port) and closes the receiver. */
async function closeSubscription(server: TestServer, receiver: WebhookReceiver, id: string) {
  await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`);
  await receiver.close();
}

function callbackTokenOf(received: Received): string {
  const token = received.headers[CALLBACK_TOKEN];
  if (typeof token !== "string") throw new Error(`${received.envelope.type} came without a callback token`);
  return token;
}

function withToken(server: TestServer, token: string, method: string, route: string, body?: unknown) {
  return rest(server.baseUrl, method, route, body, { authorization: `Bearer ${token}` });
}

function assertForbidden(t: ExecutionContext, response: JsonResponse, what: string) {
  t.is(response.status, 403, `${what}: ${JSON.stringify(response.body)}`);
  t.true(response.headers.get("www-authenticate")?.includes('error="insufficient_scope"'), what);
}

/** The field of each violation a 400 problem names. */
function fieldsOf(response: JsonResponse): string[] {
  return (response.body?.errors ?? []).map((error: { field: string }) => error.field);
}

each("each delivery carries a callback token good for its scopes only; the challenge carries none", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const id = await activeSubscription(server, receiver, ["catalog:read"]);
  try {
    const challenge = receiver.received[0];
    t.is(challenge.envelope.type, "Webhooks.Registration.Challenge");
    t.false(CALLBACK_TOKEN in challenge.headers, "no token on the challenge");

    const change = await deliveredChange(server, receiver);
    const token = callbackTokenOf(change);
    const claims = decodeJwt(token);
    t.like(claims, { scope: "catalog:read", whs: id, client_id: server.admin.clientId });
    t.is((claims.exp ?? 0) - (claims.iat ?? 0), TOKEN_TTL_SECONDS, "WEBHOOK_CALLBACK_TOKEN_TTL_SECONDS");

    const listed = await withToken(server, token, "GET", `${PRODUCTS}?pageSize=5`);
    t.is(listed.status, 200, JSON.stringify(listed.body));
    t.true(Array.isArray(listed.body.items));
    const entitlementId = String(change.envelope.entityid);
    assertForbidden(t, await withToken(server, token, "GET", ENTITLEMENTS), "list entitlements");
    assertForbidden(t, await withToken(server, token, "GET", `${ENTITLEMENTS}/${entitlementId}`), "get entitlement");
    const product = { productCode: `CB-${Date.now()}`, productVersion: "1", name: "Callback" };
    assertForbidden(t, await withToken(server, token, "POST", PRODUCTS, product), "create product");
    const productId = listed.body.items[0]?.id;
    t.truthy(productId, "a product to try writing to");
    assertForbidden(t, await withToken(server, token, "PUT", `${PRODUCTS}/${productId}`, { name: "x" }), "update");
    assertForbidden(t, await withToken(server, token, "GET", SUBSCRIPTIONS), "list subscriptions");
    assertForbidden(t, await withToken(server, token, "DELETE", `${SUBSCRIPTIONS}/${id}`), "delete its subscription");

    const fired = await rest(server.baseUrl, "POST", `${SUBSCRIPTIONS}/${id}/test-fire`, {
      eventType: "Entitlement.Renewed",
    });
    t.is(fired.status, 200, JSON.stringify(fired.body));
    const sample = await receiver.waitFor((received) => received.envelope.id === fired.body.eventId);
    t.is(decodeJwt(callbackTokenOf(sample)).whs, id, "a test-fire carries one too");
  } finally {
    await closeSubscription(server, receiver, id);
  }
});

each("a subscription without callback scopes sends no token", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const id = await activeSubscription(server, receiver, []);
  try {
    const change = await deliveredChange(server, receiver);
    t.false(CALLBACK_TOKEN in change.headers);
  } finally {
    await closeSubscription(server, receiver, id);
  }
});

each("delete verbs, wildcards and scopes beyond the calling client's are refused", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  try {
    for (const scopes of [["catalog:delete"], ["*:read"], ["catalog:*"], ["*"], ["catalog:read", "webhooks:delete"]]) {
      const refused = await createSubscription(server, receiver, { callbackScopes: scopes });
      t.is(refused.status, 400, JSON.stringify(scopes));
      t.deepEqual(fieldsOf(refused), [`callbackScopes[${scopes.length - 1}]`], JSON.stringify(refused.body));
    }

    const limited = await createClient(server.baseUrl, ["webhooks:*", "catalog:read"], "limited webhooks client");
    const authorization = `Bearer ${await accessToken(server.baseUrl, limited.clientId, limited.clientSecret)}`;
    for (const scopes of [["entitlements:read"], ["catalog:create"]]) {
      const beyond = await createSubscription(server, receiver, { callbackScopes: scopes }, authorization);
      t.is(beyond.status, 400, `${scopes}: ${JSON.stringify(beyond.body)}`);
      t.deepEqual(fieldsOf(beyond), ["callbackScopes[0]"]);
    }
    const id = await activeSubscription(server, receiver, ["catalog:read"], authorization);
    const change = await deliveredChange(server, receiver);
    t.like(decodeJwt(callbackTokenOf(change)), { client_id: limited.clientId, scope: "catalog:read" });

    const path = `${SUBSCRIPTIONS}/${id}`;
    const widened = await rest(
      server.baseUrl,
      "PATCH",
      path,
      { callbackScopes: ["entitlements:read"] },
      { authorization },
    );
    t.is(widened.status, 400, "an update beyond the caller's scopes");
    const deleting = await rest(server.baseUrl, "PATCH", path, { callbackScopes: ["catalog:delete"] });
    t.is(deleting.status, 400, "an update to a delete verb, even by a client holding it");
    const kept = await rest(server.baseUrl, "GET", path);
    t.deepEqual(kept.body.callbackScopes, ["catalog:read"], "refused updates change nothing");
    await rest(server.baseUrl, "DELETE", path);
  } finally {
    await receiver.close();
  }
});

each("a client not holding a subscription's callback scopes cannot redirect, re-key or delete it", async (t, mode) => {
  const server = t.context.servers[mode];
  const receiver = await WebhookReceiver.start();
  const elsewhere = await WebhookReceiver.start();
  try {
    const created = await createSubscription(server, receiver, { callbackScopes: ["clients:write", "catalog:read"] });
    t.is(created.status, 200, JSON.stringify(created.body));
    const path = `${SUBSCRIPTIONS}/${created.body.subscription.id}`;
    const webhooksOnly = await createClient(server.baseUrl, ["webhooks:*", "catalog:read"], "webhooks only");
    const authorization = `Bearer ${await accessToken(server.baseUrl, webhooksOnly.clientId, webhooksOnly.clientSecret)}`;
    const as = (method: string, route: string, body?: unknown) =>
      rest(server.baseUrl, method, route, body, { authorization });

    for (const [what, answer] of [
      ["a new URL", await as("PATCH", path, { url: elsewhere.url() })],
      ["narrower callback scopes", await as("PATCH", path, { callbackScopes: ["catalog:read"] })],
      ["a new description", await as("PATCH", path, { description: "mine now" })],
      ["a new secret", await as("POST", `${path}/secret`, {})],
      ["a test-fire", await as("POST", `${path}/test-fire`, { eventType: "Entitlement.Renewed" })],
      ["a deletion", await as("DELETE", path)],
    ] as const) {
      assertForbidden(t, answer, what);
      t.is(answer.body.type, "urn:provision:problem:insufficient-scope", what);
      t.regex(answer.body.detail, /callback scopes you do not hold: clients:write$/, what);
    }
    const kept = await as("GET", path);
    t.is(kept.status, 200, "reading it is still allowed");
    t.like(kept.body, { url: receiver.url(), description: "", callbackScopes: ["clients:write", "catalog:read"] });

    const plain = await createSubscription(server, receiver, {}, authorization);
    t.is(plain.status, 200, JSON.stringify(plain.body));
    const own = await as("PATCH", `${SUBSCRIPTIONS}/${plain.body.subscription.id}`, { description: "mine" });
    t.is(own.status, 200, "one without callback scopes it manages as before");
    t.is(
      (await rest(server.baseUrl, "PATCH", path, { description: "the admin's" })).status,
      200,
      "a client holding them",
    );
    for (const id of [created.body.subscription.id, plain.body.subscription.id]) {
      await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`);
    }
  } finally {
    await receiver.close();
    await elsewhere.close();
  }
});

function assertRevoked(t: ExecutionContext, response: JsonResponse, what: string) {
  t.is(response.status, 401, `${what}: ${JSON.stringify(response.body)}`);
  t.true(response.headers.get("www-authenticate")?.includes('error="invalid_token"'), what);
}

each(
  "a callback token is refused once its subscription no longer grants its scopes, or is deleted",
  async (t, mode) => {
    const server = t.context.servers[mode];
    const receiver = await WebhookReceiver.start();
    const id = await activeSubscription(server, receiver, ["catalog:read", "entitlements:read"]);
    const products = `${PRODUCTS}?pageSize=1`;
    try {
      const token = callbackTokenOf(await deliveredChange(server, receiver));
      t.is((await withToken(server, token, "GET", products)).status, 200);

      const narrowed = await rest(server.baseUrl, "PATCH", `${SUBSCRIPTIONS}/${id}`, {
        callbackScopes: ["catalog:read"],
      });
      t.is(narrowed.status, 200, JSON.stringify(narrowed.body));
      assertRevoked(t, await withToken(server, token, "GET", products), "a token with a scope taken away");

      const narrower = callbackTokenOf(await deliveredChange(server, receiver));
      t.is(decodeJwt(narrower).scope, "catalog:read");
      t.is((await withToken(server, narrower, "GET", products)).status, 200, "the next delivery's token works");
      t.is((await rest(server.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`)).status, 200);
      assertRevoked(t, await withToken(server, narrower, "GET", products), "a deleted subscription's token");
    } finally {
      await closeSubscription(server, receiver, id);
    }
  },
);

test.serial("a subscription deleted on one instance revokes its callback tokens on another at once", async (t) => {
  const database = await createTestDatabase();
  const one = await startTestServer({ databaseUrl: database.url, env: ENV });
  const other = await startTestServer({ databaseUrl: database.url, env: ENV });
  const receiver = await WebhookReceiver.start();
  t.teardown(async () => {
    await receiver.close();
    await one.close();
    await other.close();
    await database.drop();
  });
  const id = await activeSubscription(one, receiver, ["catalog:read"]);
  const token = callbackTokenOf(await deliveredChange(one, receiver));
  t.is((await withToken(other, token, "GET", `${PRODUCTS}?pageSize=1`)).status, 200, "the other instance knows it");

  t.is((await rest(one.baseUrl, "DELETE", `${SUBSCRIPTIONS}/${id}`)).status, 200);
  assertRevoked(t, await withToken(other, token, "GET", `${PRODUCTS}?pageSize=1`), "on the other instance");
});
