import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { activate, codesPath, ENTITLEMENTS, licenseClaimsOf, sessionCall } from "../support/licensing.js";
import { countMysqlQueries } from "../support/mysql-query-count.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

// An instance keeps the features each entitlement's last activation read, for the revision of the entitlement it
// read them under; an activation that locks the same revision does not read them again. These tests change the
// features between activations, through the same instance and through another, and check every license names
// the features stored when it was issued.
const test = anyTest as TestFn<{
  first: TestServer;
  second: TestServer;
  embedded: TestServer;
  folder: string;
  drop(): Promise<void>;
}>;

/** Queries of this process (both MySQL instances run in it) that read an entitlement's features. */
const featureReads = countMysqlQueries("FROM `entitlement_features`");

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.first = await startTestServer({ databaseUrl: database.url });
  t.context.second = await startTestServer({ databaseUrl: database.url });
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-test-"));
  t.context.embedded = await startTestServer({ embedded: { file: path.join(t.context.folder, "provision.sqlite") } });
});

test.after.always(async (t) => {
  for (const server of [t.context.first, t.context.second, t.context.embedded]) await server?.close();
  await t.context.drop?.();
  if (t.context.folder) fs.rmSync(t.context.folder, { recursive: true, force: true });
});

/** An entitlement whose one feature (`export`, value 10) may have its value and enabled flag changed. */
async function entitlementWithFeature(baseUrl: string) {
  const suffix = Math.random().toString(36).slice(2, 10);
  const product = await rest(baseUrl, "POST", PRODUCTS, {
    productCode: `FEA-${suffix}`,
    productVersion: "1",
    name: "F",
  });
  const feature = {
    featureCode: "export",
    name: "Export",
    value: "10",
    isEnabled: true,
    canModifyValueOnEntitlement: true,
    canModifyEnabledOnEntitlement: true,
  };
  ok(await rest(baseUrl, "PUT", `${PRODUCTS}/${product.body.id}`, { features: [feature] }));
  const created = await rest(baseUrl, "POST", ENTITLEMENTS, {
    name: `Customer ${suffix}`,
    productIds: [product.body.id],
    activationPolicy: { claimBasedActivation: { numberOfSeats: 100, isFloatingLicense: true } },
  });
  ok(created);
  const issued = await rest(baseUrl, "POST", codesPath(created.body.id), { useEntitlementMaxActivations: true });
  ok(issued);
  return {
    entitlementId: created.body.id as string,
    featureId: created.body.features[0].id as string,
    code: issued.body.activationCode as string,
  };
}

function ok(response: { status: number; body: unknown }): void {
  if (response.status !== 200) throw new Error(`setup failed: ${response.status} ${JSON.stringify(response.body)}`);
}

/** The `fea` claim of a new license for a new device. */
async function featuresOfNewLicense(baseUrl: string, code: string): Promise<Record<string, string>> {
  const answer = await activate(baseUrl, { activationCode: code, fingerprint: `device-${Math.random()}` });
  if (answer.status !== 200) throw new Error(`activation: ${answer.status} ${JSON.stringify(answer.body)}`);
  const token = answer.body.licenseToken as string;
  return licenseClaimsOf(token).fea;
}

function changeFeature(baseUrl: string, entitlementId: string, change: Record<string, unknown>) {
  return rest(baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, { features: [change] });
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: a license names the features as changed since the last activation`, async (t) => {
    const { baseUrl } = mode === "MySQL" ? t.context.first : t.context.embedded;
    const { entitlementId, featureId, code } = await entitlementWithFeature(baseUrl);
    t.deepEqual(await featuresOfNewLicense(baseUrl, code), { export: "10" });
    t.deepEqual(await featuresOfNewLicense(baseUrl, code), { export: "10" });
    t.is((await changeFeature(baseUrl, entitlementId, { id: featureId, value: "7" })).status, 200);
    t.deepEqual(await featuresOfNewLicense(baseUrl, code), { export: "7" });
    t.is((await changeFeature(baseUrl, entitlementId, { id: featureId, isEnabled: false })).status, 200);
    t.deepEqual(await featuresOfNewLicense(baseUrl, code), {});
  });
}

// Serial tests run before the others, alone: no other test's queries are counted.
test.serial("MySQL: features are read again only when the entitlement's revision moved", async (t) => {
  const { first } = t.context;
  const { entitlementId, featureId, code } = await entitlementWithFeature(first.baseUrl);
  const readsOf = async (expected: Record<string, string>) => {
    const before = featureReads();
    t.deepEqual(await featuresOfNewLicense(first.baseUrl, code), expected);
    return featureReads() - before;
  };
  t.is(await readsOf({ export: "10" }), 1);
  t.is(await readsOf({ export: "10" }), 0);
  t.is(await readsOf({ export: "10" }), 0);
  t.is((await changeFeature(first.baseUrl, entitlementId, { id: featureId, value: "3" })).status, 200);
  t.is(await readsOf({ export: "3" }), 1);
  t.is(await readsOf({ export: "3" }), 0);
});

test("MySQL: a feature changed through another instance is in this instance's next license", async (t) => {
  const { first, second } = t.context;
  const { entitlementId, featureId, code } = await entitlementWithFeature(first.baseUrl);
  t.deepEqual(await featuresOfNewLicense(second.baseUrl, code), { export: "10" });
  t.deepEqual(await featuresOfNewLicense(second.baseUrl, code), { export: "10" });
  t.is((await changeFeature(first.baseUrl, entitlementId, { id: featureId, value: "42" })).status, 200);
  // No waiting for an invalidation: the revision the second instance locks tells it at once.
  t.deepEqual(await featuresOfNewLicense(second.baseUrl, code), { export: "42" });
});

/** A license for a new device, and a way to renew it answering the renewed token's `fea` claim. */
async function renewable(baseUrl: string, code: string) {
  const answer = await activate(baseUrl, { activationCode: code, fingerprint: `device-${Math.random()}` });
  if (answer.status !== 200) throw new Error(`activation: ${answer.status} ${JSON.stringify(answer.body)}`);
  let token = answer.body.licenseToken as string;
  return async (on = baseUrl): Promise<Record<string, string>> => {
    const renewed = await sessionCall(on, token, "renew");
    if (renewed.status !== 200) throw new Error(`renew: ${renewed.status} ${JSON.stringify(renewed.body)}`);
    token = renewed.body.licenseToken as string;
    return licenseClaimsOf(token).fea;
  };
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: a renewed license names the features as changed since`, async (t) => {
    const { baseUrl } = mode === "MySQL" ? t.context.first : t.context.embedded;
    const { entitlementId, featureId, code } = await entitlementWithFeature(baseUrl);
    const renew = await renewable(baseUrl, code);
    t.deepEqual(await renew(), { export: "10" });
    t.is((await changeFeature(baseUrl, entitlementId, { id: featureId, value: "5" })).status, 200);
    t.deepEqual(await renew(), { export: "5" });
    t.is((await changeFeature(baseUrl, entitlementId, { id: featureId, isEnabled: false })).status, 200);
    t.deepEqual(await renew(), {});
  });
}

test.serial("MySQL: renew reads the features only when no activation kept them for the revision it read", async (t) => {
  const { first, second } = t.context;
  const { entitlementId, featureId, code } = await entitlementWithFeature(first.baseUrl);
  const renew = await renewable(first.baseUrl, code);
  const readsOf = async (expected: Record<string, string>, on = first.baseUrl) => {
    const before = featureReads();
    t.deepEqual(await renew(on), expected);
    return featureReads() - before;
  };
  t.is(await readsOf({ export: "10" }), 0, "kept by the activation");
  t.is((await changeFeature(first.baseUrl, entitlementId, { id: featureId, value: "8" })).status, 200);
  t.is(await readsOf({ export: "8" }), 1, "a new revision, not kept yet");
  t.is(await readsOf({ export: "8" }, second.baseUrl), 1, "another instance kept nothing");
  t.deepEqual(await featuresOfNewLicense(first.baseUrl, code), { export: "8" });
  t.is(await readsOf({ export: "8" }), 0, "kept by the activation since");
});
