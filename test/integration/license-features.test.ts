import anyTest, { type TestFn } from "ava";
import {
  activate,
  codesPath,
  ENTITLEMENTS,
  entitlementWithCode,
  licenseClaimsOf,
  sessionCall,
} from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

const DAY = 86_400_000;
const OFFLINE = { claimBasedActivation: { numberOfSeats: 5, leaseTime: "30.00:00:00", allowOffLineUse: true } };

async function tokenAfterExpiring(baseUrl: string, featureExpiration: string) {
  const { entitlementId, code } = await entitlementWithCode(baseUrl, OFFLINE);
  const updated = await rest(baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, {
    features: [{ featureCode: "export", featureExpiration }],
  });
  if (updated.status !== 200) throw new Error(JSON.stringify(updated.body));
  const answer = await activate(baseUrl, { activationCode: code, fingerprint: "expiring-features" });
  if (answer.status !== 200) throw new Error(JSON.stringify(answer.body));
  return answer.body.licenseToken as string;
}

test("a feature that ends before the token's grace end carries its end in `fex`", async (t) => {
  const { baseUrl } = t.context.server;
  const ends = new Date(Math.floor((Date.now() + 2 * DAY) / 1000) * 1000);
  const token = await tokenAfterExpiring(baseUrl, ends.toISOString());
  const claims = licenseClaimsOf(token);
  t.deepEqual(claims.fea, { export: "10" });
  t.true(claims.off);
  t.deepEqual(claims.fex, { export: ends.getTime() / 1000 });
  const renewed = await sessionCall(baseUrl, token, "renew");
  t.is(renewed.status, 200);
  t.deepEqual(licenseClaimsOf(renewed.body.licenseToken).fex, { export: ends.getTime() / 1000 });
});

test("a token whose features all outlast it has no `fex`", async (t) => {
  const token = await tokenAfterExpiring(t.context.server.baseUrl, "2099-01-01T00:00:00Z");
  t.deepEqual(licenseClaimsOf(token).fea, { export: "10" });
  t.false("fex" in licenseClaimsOf(token));
});

test("a feature's expiry cleared (`clearFeatureExpiration`) leaves `fex` and the entitlement", async (t) => {
  const { baseUrl } = t.context.server;
  const { entitlementId, code } = await entitlementWithCode(baseUrl, OFFLINE);
  const path = `${ENTITLEMENTS}/${entitlementId}`;
  const ends = new Date(Math.floor((Date.now() + 2 * DAY) / 1000) * 1000).toISOString();
  const expiring = await rest(baseUrl, "PUT", path, { features: [{ featureCode: "export", featureExpiration: ends }] });
  t.is(expiring.status, 200);
  const cleared = await rest(baseUrl, "PUT", path, {
    features: [{ featureCode: "export", featureExpiration: ends, clearFeatureExpiration: true }],
  });
  t.is(cleared.status, 200);
  const read = await rest(baseUrl, "GET", path);
  const feature = read.body.features.find((each: { featureCode: string }) => each.featureCode === "export");
  t.is(feature.featureExpiration ?? null, null, JSON.stringify(feature));
  const answer = await activate(baseUrl, { activationCode: code, fingerprint: "cleared-expiry" });
  t.is(answer.status, 200);
  t.deepEqual(licenseClaimsOf(answer.body.licenseToken).fea, { export: "10" });
  t.false("fex" in licenseClaimsOf(answer.body.licenseToken));
});

async function productWithExport(baseUrl: string, value: string): Promise<string> {
  const suffix = Math.random().toString(36).slice(2, 10);
  const product = await rest(baseUrl, "POST", PRODUCTS, { productCode: `FEA-${suffix}`, name: value });
  const features = [{ featureCode: "export", value, isEnabled: true }];
  const updated = await rest(baseUrl, "PUT", `${PRODUCTS}/${product.body.id}`, { features });
  if (updated.status !== 200) throw new Error(JSON.stringify(updated.body));
  return product.body.id;
}

test("features of several products sharing a code: the first product's, in the entitlement's order", async (t) => {
  const { baseUrl } = t.context.server;
  const first = await productWithExport(baseUrl, "first");
  const second = await productWithExport(baseUrl, "second");
  for (let round = 0; round < 6; round++) {
    const productIds = round % 2 === 0 ? [first, second] : [second, first];
    const created = await rest(baseUrl, "POST", ENTITLEMENTS, { name: "Both", productIds, activationPolicy: OFFLINE });
    const issued = await rest(baseUrl, "POST", codesPath(created.body.id), { useEntitlementMaxActivations: true });
    const answer = await activate(baseUrl, { activationCode: issued.body.activationCode, fingerprint: "shared-code" });
    t.is(answer.status, 200);
    t.deepEqual(licenseClaimsOf(answer.body.licenseToken).fea, { export: round % 2 === 0 ? "first" : "second" });
  }
});
