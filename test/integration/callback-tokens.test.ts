import { randomUUID } from "node:crypto";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import {
  type CallbackGrant,
  CallbackTokens,
  DEFAULT_CALLBACK_TOKEN_TTL_SECONDS,
} from "../../src/webhooks/callback-tokens.js";
import { bearerWithScopes, mintAccessToken } from "../support/credentials.js";
import { ENTITLEMENTS } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { CLIENTS } from "../support/oauth-clients.js";
import { type JsonResponse, PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { SUBSCRIPTIONS } from "../support/webhooks.js";

interface Context {
  server: TestServer;
  clock: ManualClock;
  callbackTokens: CallbackTokens;
  warnings: unknown[];
}

const test = anyTest as TestFn<Context>;
const TTL_MS = DEFAULT_CALLBACK_TOKEN_TTL_SECONDS * 1000;
/** The clock skew access token checks tolerate (key-store.ts). */
const SKEW_MS = 30_000;
/** The subscriptions' endpoint: a loopback port nothing listens on (their challenges are never answered). */
const UNANSWERED_RECEIVER = "http://127.0.0.1:9/hooks";

test.before(async (t) => {
  const clock = manualClock();
  const server = await startTestServer({ clock, env: { WEBHOOK_TRUSTED_TARGETS: "127.0.0.1" } });
  const identity = new IdentityRepository(server.app.dataSource);
  const warnings: unknown[] = [];
  const callbackTokens = new CallbackTokens({
    tokens: server.app.tokens,
    // Straight from the database: the server's own cached client states are what the tests put to the test.
    clients: { get: (clientId) => identity.findClient(clientId) },
    clock,
    lifetimeSeconds: DEFAULT_CALLBACK_TOKEN_TTL_SECONDS,
    logger: { warn: (...args: unknown[]) => warnings.push(args) } as never,
  });
  t.context = { server, clock, callbackTokens, warnings };
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** The bootstrap client's authorization, minted now (the manual clock outruns the server's own token). */
async function adminCall(server: TestServer, method: string, path: string, body?: unknown) {
  const authorization = await bearerWithScopes(server, ["*"]);
  return rest(server.baseUrl, method, path, body, { authorization });
}

/**
 * A client holding more than its subscription's callback scopes, and a grant of a few of them: the callback scopes
 * of a subscription that client created (a callback token answers to its subscription as it is now).
 */
async function clientWithGrant(server: TestServer, scopes = ["catalog:read", "catalog:create"]) {
  const clientScopes = ["catalog:*", "entitlements:read", "webhooks:create"];
  const { status, body } = await adminCall(server, "POST", CLIENTS, { name: "billing", scopes: clientScopes });
  if (status !== 200) throw new Error(`creating a client answered ${status}`);
  const clientId = body.client.clientId as string;
  const authorization = `Bearer ${await mintAccessToken(server.app, clientId, clientScopes)}`;
  const subscription = await rest(
    server.baseUrl,
    "POST",
    SUBSCRIPTIONS,
    { url: UNANSWERED_RECEIVER, eventTypes: ["Entitlement.*"], callbackScopes: scopes },
    { authorization },
  );
  if (subscription.status !== 200) throw new Error(`subscription: ${JSON.stringify(subscription.body)}`);
  const grant: CallbackGrant = {
    subscriptionId: subscription.body.subscription.id,
    providerId: DEFAULT_PROVIDER_ID,
    clientId,
    scopes,
  };
  return grant;
}

async function issued(t: ExecutionContext<Context>, grant: CallbackGrant): Promise<string> {
  const token = await t.context.callbackTokens.tokenFor(grant);
  if (token === undefined) throw new Error("no callback token");
  return token;
}

function listProducts(server: TestServer, token: string): Promise<JsonResponse> {
  return rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` });
}

function assertRefused(t: ExecutionContext, response: JsonResponse, status: 401 | 403, what: string) {
  t.is(response.status, status, `${what}: ${JSON.stringify(response.body)}`);
  const error = status === 401 ? 'error="invalid_token"' : 'error="insufficient_scope"';
  t.true(response.headers.get("www-authenticate")?.includes(error), what);
}

test.serial("a callback token is an access token of the client with exactly the callback scopes", async (t) => {
  const grant = await clientWithGrant(t.context.server);
  const token = await issued(t, grant);
  t.like(decodeProtectedHeader(token), { alg: "ES256", typ: "at+jwt" });
  const claims = decodeJwt(token);
  t.like(claims, {
    aud: "provision-api",
    sub: grant.clientId,
    client_id: grant.clientId,
    provider_id: DEFAULT_PROVIDER_ID,
    scope: "catalog:read catalog:create",
    whs: grant.subscriptionId,
    iat: t.context.clock.now().getTime() / 1000,
  });
  t.is((claims.exp ?? 0) - (claims.iat ?? 0), DEFAULT_CALLBACK_TOKEN_TTL_SECONDS);
  t.is(claims.iss, decodeJwt(t.context.server.adminAuthorization.slice("Bearer ".length)).iss);
});

test.serial(
  "the admin API takes it for its scopes and answers 403 beyond them, even within the client's",
  async (t) => {
    const { server } = t.context;
    const token = await issued(t, await clientWithGrant(server));
    const authorization = `Bearer ${token}`;

    t.is((await listProducts(server, token)).status, 200);
    const productCode = `CB-${randomUUID().slice(0, 8)}`;
    const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode, name: "Callback" }, { authorization });
    t.is(created.status, 200, JSON.stringify(created.body));

    const path = `${PRODUCTS}/${created.body.id}`;
    assertRefused(t, await rest(server.baseUrl, "PUT", path, { name: "Changed" }, { authorization }), 403, "update");
    assertRefused(
      t,
      await rest(server.baseUrl, "GET", ENTITLEMENTS, undefined, { authorization }),
      403,
      "entitlements",
    );
    assertRefused(t, await rest(server.baseUrl, "GET", CLIENTS, undefined, { authorization }), 403, "clients");
    t.is((await adminCall(server, "PUT", path, { name: "Changed" })).status, 200, "the update itself is fine");
  },
);

test.serial("one token per subscription, reissued once half its life has passed", async (t) => {
  const { server, clock, callbackTokens } = t.context;
  const grant = await clientWithGrant(server);
  const first = await issued(t, grant);
  t.is(await issued(t, grant), first);
  t.not(await issued(t, { ...grant, subscriptionId: randomUUID() }), first, "another subscription, another token");

  clock.advance(TTL_MS / 2 - 1000);
  t.is(await issued(t, grant), first);
  clock.advance(1000);
  const second = await issued(t, grant);
  t.not(second, first);
  t.is(decodeJwt(second).iat, clock.now().getTime() / 1000);
  t.is((await listProducts(server, first)).status, 200, "the first is still valid until it expires");
  t.is((await listProducts(server, second)).status, 200);

  const narrowed = await issued(t, { ...grant, scopes: ["catalog:read"] });
  t.not(narrowed, second, "changed callback scopes get a new token at once");
  t.is(decodeJwt(narrowed).scope, "catalog:read");
  t.is(await callbackTokens.tokenFor({ ...grant, scopes: [] }), undefined, "no callback scopes, no token");
});

test.serial("a callback token is refused with 401 once expired", async (t) => {
  const { server, clock } = t.context;
  const grant = await clientWithGrant(server);
  const token = await issued(t, grant);
  t.is((await listProducts(server, token)).status, 200);

  clock.advance(TTL_MS + SKEW_MS - 1000);
  t.is((await listProducts(server, token)).status, 200, "within the tolerated clock skew");
  clock.advance(2000);
  const expired = await listProducts(server, token);
  assertRefused(t, expired, 401, "expired");
  t.true(expired.headers.get("www-authenticate")?.includes('error_description="expired"'));
  t.is((await listProducts(server, await issued(t, grant))).status, 200, "the subscription gets a new one");
});

test.serial("a disabled client's callback token is refused with 401 and no new one is issued", async (t) => {
  const { server, callbackTokens, warnings } = t.context;
  const grant = await clientWithGrant(server);
  const token = await issued(t, grant);
  t.is((await listProducts(server, token)).status, 200);

  t.is((await adminCall(server, "PUT", `${CLIENTS}/${grant.clientId}/enabled/false`)).status, 200);
  assertRefused(t, await listProducts(server, token), 401, "disabled");
  const warningsBefore = warnings.length;
  t.is(await callbackTokens.tokenFor(grant), undefined);
  t.is(await callbackTokens.tokenFor(grant), undefined);
  t.is(warnings.length, warningsBefore + 1, "reported once, not at every delivery");
  t.true(JSON.stringify(warnings.at(-1)).includes(grant.subscriptionId));

  t.is((await adminCall(server, "PUT", `${CLIENTS}/${grant.clientId}/enabled/true`)).status, 200);
  assertRefused(t, await listProducts(server, token), 401, "enabling does not revive the old token");
  const renewed = await issued(t, grant);
  t.not(renewed, token);
  t.is((await listProducts(server, renewed)).status, 200);
});

test.serial("a new client secret gets a token of the new generation; a deleted client gets none", async (t) => {
  const { server, callbackTokens } = t.context;
  const grant = await clientWithGrant(server);
  const token = await issued(t, grant);

  t.is((await adminCall(server, "POST", `${CLIENTS}/${grant.clientId}/secret`, {})).status, 200);
  assertRefused(t, await listProducts(server, token), 401, "old generation");
  const rotated = await issued(t, grant);
  t.not(rotated, token);
  t.not(decodeJwt(rotated).gen, decodeJwt(token).gen);
  t.is((await listProducts(server, rotated)).status, 200);

  t.is((await adminCall(server, "DELETE", `${CLIENTS}/${grant.clientId}`)).status, 200);
  assertRefused(t, await listProducts(server, rotated), 401, "deleted");
  t.is(await callbackTokens.tokenFor(grant), undefined);
});

test.serial("a token is never issued for a client of another provider than the subscription's", async (t) => {
  const grant = await clientWithGrant(t.context.server);
  t.is(await t.context.callbackTokens.tokenFor({ ...grant, providerId: randomUUID() }), undefined);
});
