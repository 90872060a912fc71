import anyTest, { type TestFn } from "ava";
import {
  activate,
  codesPath,
  ENTITLEMENTS,
  entitlementWithCode,
  licenseClaimsOf,
  sessionCall,
  setProductStatus,
} from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
  // Statuses are kept per instance once its invalidation subscriptions stand: the tests run with them kept.
  await new Promise((resolve) => setTimeout(resolve, 1500));
});

test.after.always(async (t) => {
  await t.context.close?.();
});

const STATUS = { draft: 1, active: 2, suspended: 4, deprecated: 5, endOfSale: 6, retired: 7 };
const POLICY = { claimBasedActivation: { numberOfSeats: 10, isFloatingLicense: true } };

function entitle(baseUrl: string, productIds: string[]) {
  return rest(baseUrl, "POST", ENTITLEMENTS, { name: "Later customer", productIds, activationPolicy: POLICY });
}

const device = () => `device-${Math.random().toString(36).slice(2, 10)}`;

for (const name of ["MySQL", "SQLite"] as const) {
  test(`${name}: a product's lifecycle status decides new entitlements, activations and renewals`, async (t) => {
    const { baseUrl } = t.context.servers[name];
    const { productId, code } = await entitlementWithCode(baseUrl, POLICY);
    const first = await activate(baseUrl, { activationCode: code, fingerprint: device() });
    t.is(first.status, 200, JSON.stringify(first.body));
    const token = first.body.licenseToken as string;

    await setProductStatus(baseUrl, productId, STATUS.suspended);
    const refused = await activate(baseUrl, { activationCode: code, fingerprint: device() });
    t.is(refused.status, 403, JSON.stringify(refused.body));
    t.is(refused.body.type, "urn:provision:problem:product-unavailable");
    t.is((await sessionCall(baseUrl, token, "renew")).status, 200, "a suspended product's licenses keep working");
    t.is((await entitle(baseUrl, [productId])).status, 400);

    for (const status of [STATUS.deprecated, STATUS.endOfSale]) {
      await setProductStatus(baseUrl, productId, status);
      t.is((await activate(baseUrl, { activationCode: code, fingerprint: device() })).status, 200);
      t.is((await sessionCall(baseUrl, token, "renew")).status, 200);
    }
    t.is((await entitle(baseUrl, [productId])).status, 400, "end of sale: no new entitlements");

    await setProductStatus(baseUrl, productId, STATUS.retired);
    const renewal = await sessionCall(baseUrl, token, "renew");
    t.is(renewal.status, 403, JSON.stringify(renewal.body));
    t.is(renewal.body.type, "urn:provision:problem:product-unavailable");
    t.is((await activate(baseUrl, { activationCode: code, fingerprint: device() })).status, 403);

    await setProductStatus(baseUrl, productId, STATUS.active);
    t.is((await sessionCall(baseUrl, token, "renew")).status, 200, "back on sale");
  });

  test(`${name}: deprecated products are entitled; draft ones are not, from a template neither`, async (t) => {
    const { baseUrl } = t.context.servers[name];
    const { productId, entitlementId } = await entitlementWithCode(baseUrl, POLICY);
    const template = await rest(baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
      entitlementId,
      templateName: `Lifecycle ${entitlementId}`,
      templateVersion: "1",
    });
    t.is(template.status, 200);
    const fromTemplate = () =>
      rest(baseUrl, "POST", `${ENTITLEMENTS}/templates/from-template`, { entitlementTemplateId: template.body.id });
    await setProductStatus(baseUrl, productId, STATUS.deprecated);
    t.is((await entitle(baseUrl, [productId])).status, 200);
    t.is((await fromTemplate()).status, 200);
    await setProductStatus(baseUrl, productId, STATUS.draft);
    const refused = await entitle(baseUrl, [productId]);
    t.is(refused.status, 400);
    t.like(refused.body.errors?.[0], { field: "productIds[0]" });
    const refusedCopy = await fromTemplate();
    t.is(refusedCopy.status, 400, JSON.stringify(refusedCopy.body));
    t.like(refusedCopy.body.errors?.[0], { field: "entitlementTemplateId" });
  });

  test(`${name}: a license names only the entitlement's products that take activations`, async (t) => {
    const { baseUrl } = t.context.servers[name];
    const kept = await entitlementWithCode(baseUrl, POLICY);
    const retiring = await entitlementWithCode(baseUrl, POLICY);
    const features = [{ featureCode: "retiring-only", value: "x", isEnabled: true }];
    t.is((await rest(baseUrl, "PUT", `${PRODUCTS}/${retiring.productId}`, { features })).status, 200);
    const both = await entitle(baseUrl, [kept.productId, retiring.productId]);
    t.is(both.status, 200);
    const issued = await rest(baseUrl, "POST", codesPath(both.body.id), { useEntitlementMaxActivations: true });
    await setProductStatus(baseUrl, retiring.productId, STATUS.retired);
    const answer = await activate(baseUrl, { activationCode: issued.body.activationCode, fingerprint: device() });
    t.is(answer.status, 200, JSON.stringify(answer.body));
    t.deepEqual(answer.body.licensedProducts, [kept.productId]);
    const claims = licenseClaimsOf(answer.body.licenseToken);
    t.deepEqual(claims.prd, [kept.productId]);
    t.deepEqual(claims.fea, { export: "10" }, "no feature of the retired product");
  });
}
