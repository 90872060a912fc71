import { randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { accessToken } from "../support/auth.js";
import { activate, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { createProviderWithClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases, type TestServer } from "../support/test-server.js";
import { insertSubscription } from "../support/webhooks.js";

// The outbox writes a broadcast event only while its provider has a subscription that receives events (the
// states the fan-out matches); these tests read the outbox after activations as subscriptions come and go.
const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
});

test.after.always(async (t) => {
  await t.context.close?.();
});

/** Activates `fingerprint` and answers how many Entitlement.Activated events the outbox holds for it. */
async function activatedEvents(server: TestServer, code: string, fingerprint: string): Promise<number> {
  const answer = await activate(server.baseUrl, { activationCode: code, fingerprint });
  if (answer.status !== 200) throw new Error(`activation: ${JSON.stringify(answer.body)}`);
  const rows = (await server.app.dataSource.query(
    "SELECT payload FROM webhook_events WHERE type = 'Entitlement.Activated'",
  )) as { payload: string }[];
  return rows.filter((row) => JSON.parse(row.payload).data.fingerprint === fingerprint).length;
}

/** The types of the events the outbox holds about this entitlement. */
async function eventTypesOf(server: TestServer, entitlementId: string): Promise<string[]> {
  const rows = (await server.app.dataSource.query(
    "SELECT type FROM webhook_events WHERE entity_kind = 'entitlement' AND entity_id = ? ORDER BY type",
    [entitlementId],
  )) as { type: string }[];
  return rows.map((row) => row.type);
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: an event is written only while its provider has a subscription that receives events`, async (t) => {
    const server = t.context.servers[mode];
    const policy = { claimBasedActivation: { numberOfSeats: 20, isFloatingLicense: true } };
    const { code, entitlementId } = await entitlementWithCode(server.baseUrl, policy);
    t.deepEqual(await eventTypesOf(server, entitlementId), [], "no subscription: creating writes no event");
    t.is(await activatedEvents(server, code, "nobody-subscribed"), 0, "no subscription");

    await insertSubscription(server, { state: SubscriptionState.ACTIVE, providerId: randomUUID() });
    t.is(await activatedEvents(server, code, "another-provider"), 0, "another provider's subscription");
    await insertSubscription(server, { state: SubscriptionState.DISABLED });
    t.is(await activatedEvents(server, code, "disabled"), 0, "a Disabled subscription");
    await insertSubscription(server, { state: SubscriptionState.PENDING_VERIFICATION, verified: false });
    t.is(await activatedEvents(server, code, "never-verified"), 0, "a subscription never verified");
    await insertSubscription(server, { state: SubscriptionState.SUSPENDED, deleted: true });
    t.is(await activatedEvents(server, code, "deleted"), 0, "a deleted subscription");

    const suspended = await insertSubscription(server, { state: SubscriptionState.SUSPENDED });
    t.is(await activatedEvents(server, code, "suspended"), 1, "a Suspended subscription keeps its events");
    await server.app.dataSource.query("UPDATE webhook_subscriptions SET deleted_at = updated_at WHERE id = ?", [
      suspended,
    ]);
    t.is(await activatedEvents(server, code, "after-delete"), 0, "none once it is deleted");
    await insertSubscription(server, { state: SubscriptionState.PENDING_VERIFICATION, verified: true });
    t.is(await activatedEvents(server, code, "re-verifying"), 1, "verified once, pending again (a new URL)");
    const later = await entitlementWithCode(server.baseUrl, policy);
    t.true((await eventTypesOf(server, later.entitlementId)).includes("Entitlement.PlanApplied"), "creating writes it");
  });
}

/**
 * A product, an entitlement of it, a change that is no event (its name) and one that is (revoking it), a template
 * of it and an entitlement from that template.
 */
async function entitlementChanges(server: TestServer, authorization: string, label: string): Promise<void> {
  const call = async (method: "POST" | "PUT", path: string, body: Record<string, unknown>) => {
    const answer = await rest(server.baseUrl, method, path, body, { authorization });
    if (answer.status !== 200) throw new Error(`${method} ${path}: ${JSON.stringify(answer.body)}`);
    return answer.body;
  };
  const product = await call("POST", PRODUCTS, { productCode: `WAKE-${label}`, name: label });
  const entitlement = await call("POST", ENTITLEMENTS, { name: label, productIds: [product.id] });
  await call("PUT", `${ENTITLEMENTS}/${entitlement.id}`, { name: `${label} renamed` });
  await call("PUT", `${ENTITLEMENTS}/${entitlement.id}`, { isRevoked: true });
  const template = await call("POST", `${ENTITLEMENTS}/templates/to-template`, {
    entitlementId: entitlement.id,
    templateName: label,
    templateVersion: "1",
  });
  await call("POST", `${ENTITLEMENTS}/templates/from-template`, { entitlementTemplateId: template.id });
}

// Serial, so that no other test's events wake the worker while this one counts.
for (const mode of ["MySQL", "SQLite"] as const) {
  test.serial(`${mode}: entitlement changes wake the delivery worker only when they wrote an event`, async (t) => {
    const server = t.context.servers[mode];
    const tenant = await createProviderWithClient(server);
    const authorization = `Bearer ${await accessToken(server.baseUrl, tenant.clientId, tenant.clientSecret)}`;
    let wakeUps = 0;
    const stopCounting = server.app.outbox.onCommitted(() => wakeUps++);
    try {
      await entitlementChanges(server, authorization, `none-${mode}`);
      t.is(wakeUps, 0, "a provider without a subscription: nothing written, nothing woken");
      await insertSubscription(server, { state: SubscriptionState.SUSPENDED, providerId: tenant.providerId });
      await entitlementChanges(server, authorization, `some-${mode}`);
      t.is(wakeUps, 3, "with a receiving subscription: creating, revoking and creating from the template");
    } finally {
      stopCounting();
    }
  });
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: an update that changes nothing announces no plan change`, async (t) => {
    const server = t.context.servers[mode];
    const tenant = await createProviderWithClient(server);
    const headers = {
      authorization: `Bearer ${await accessToken(server.baseUrl, tenant.clientId, tenant.clientSecret)}`,
    };
    await insertSubscription(server, { state: SubscriptionState.ACTIVE, providerId: tenant.providerId });
    const policy = { claimBasedActivation: { numberOfSeats: 2 } };
    const { entitlementId } = await entitlementWithCode(server.baseUrl, policy, undefined, {}, headers);
    const path = `${ENTITLEMENTS}/${entitlementId}`;
    const { body: entitlement } = await rest(server.baseUrl, "GET", path, undefined, headers);
    const [feature] = entitlement.features;
    const sameFeature = { id: feature.id, value: feature.value, isEnabled: feature.isEnabled };
    t.is((await rest(server.baseUrl, "PUT", path, { ...entitlement, features: [sameFeature] }, headers)).status, 200);
    const seats = `/api/v1/provision/operational/entitlement/entitlements/${entitlementId}/policies/claim-based/seats`;
    t.is((await rest(server.baseUrl, "PUT", seats, { numberOfSeats: 2 }, headers)).status, 200);
    t.deepEqual(await eventTypesOf(server, entitlementId), ["Entitlement.PlanApplied"], "its creation's alone");
    // As a policy was stored before the authentication level was always written: read and sent back, no change.
    await server.app.dataSource.query("UPDATE entitlements SET activation_policy = ? WHERE id = ?", [
      JSON.stringify(policy),
      entitlementId,
    ]);
    const { body: older } = await rest(server.baseUrl, "GET", path, undefined, headers);
    const sentBack = await rest(server.baseUrl, "PUT", path, older, headers);
    t.is(sentBack.body.updatedAt, entitlement.updatedAt, "an older stored policy sent back is no change");
    t.deepEqual(await eventTypesOf(server, entitlementId), ["Entitlement.PlanApplied"]);
    const later = { id: feature.id, featureExpiration: "2030-01-01T00:00:00Z" };
    const changed = await rest(server.baseUrl, "PUT", path, { features: [later] }, headers);
    t.is(changed.status, 200, JSON.stringify(changed.body));
    t.deepEqual(await eventTypesOf(server, entitlementId), ["Entitlement.PlanApplied", "Entitlement.PlanApplied"]);
  });
}
