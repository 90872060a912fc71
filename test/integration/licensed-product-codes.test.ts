import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { activate, ENTITLEMENTS, entitlementWithCode, licenseClaimsOf, sessionCall } from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

// Each instance keeps an entitlement's product ids (fixed when it was created) and stops reading them; the
// products' codes and versions can change at any time, so the product-code rule reads them afresh. These tests
// change them, and the policy, on one instance and activate on another that has its caches warm.

interface Context {
  pairs: Record<Mode, { changer: TestServer; activator: TestServer }>;
  dropDatabase(): Promise<void>;
  folder: string;
}
type Mode = "mysql" | "embedded";
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.dropDatabase = database.drop;
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-product-codes-"));
  const embedded = await startTestServer({ embedded: { file: path.join(t.context.folder, "db.sqlite") } });
  t.context.pairs = {
    mysql: {
      changer: await startTestServer({ databaseUrl: database.url }),
      activator: await startTestServer({ databaseUrl: database.url }),
    },
    embedded: { changer: embedded, activator: embedded },
  };
});

test.after.always(async (t) => {
  const servers = new Set(Object.values(t.context.pairs ?? {}).flatMap((pair) => [pair.changer, pair.activator]));
  for (const server of servers) await server.close();
  await t.context.dropDatabase?.();
  if (t.context.folder) fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of ["mysql", "embedded"] as const) test(`${mode}: ${title}`, (t) => body(t, mode));
}

let devices = 0;
async function activateAs(server: TestServer, activationCode: string, targetSoftwareVersion: string) {
  devices++;
  return activate(server.baseUrl, { activationCode, fingerprint: `product-codes-${devices}`, targetSoftwareVersion });
}

async function renameProduct(server: TestServer, productId: string, productCode: string, productVersion: string) {
  const changed = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${productId}`, { productCode, productVersion });
  if (changed.status !== 200) throw new Error(`product: ${JSON.stringify(changed.body)}`);
}

function assertRefused(t: ExecutionContext, answer: { status: number; body: Record<string, unknown> }, what: string) {
  t.is(answer.status, 403, `${what}: ${JSON.stringify(answer.body)}`);
  t.is(answer.body.type, "urn:provision:problem:product-code-required", what);
}

each("a product's new code and version hold at the next activation on every instance", async (t, mode) => {
  const { changer, activator } = t.context.pairs[mode];
  const { code, productId } = await entitlementWithCode(changer.baseUrl, { requireProductCode: true });
  const product = await rest(changer.baseUrl, "GET", `${PRODUCTS}/${productId}`);
  const before = `${product.body.productCode}:1`;
  for (let warm = 0; warm < 2; warm++) t.is((await activateAs(activator, code, before)).status, 200, "before");

  const renamed = `${product.body.productCode}-NEW`;
  await renameProduct(changer, productId, renamed, "2");
  assertRefused(t, await activateAs(activator, code, before), "the old code and version");
  assertRefused(t, await activateAs(activator, code, `${renamed}:1`), "the new code, the old version");
  const after = await activateAs(activator, code, `${renamed}:2`);
  t.is(after.status, 200, JSON.stringify(after.body));
  t.deepEqual(licenseClaimsOf(after.body.licenseToken).prd, [productId]);
});

each("the product-code rule turned on later reads the codes, though the ids were kept", async (t, mode) => {
  const { changer, activator } = t.context.pairs[mode];
  const { code, productId, entitlementId } = await entitlementWithCode(changer.baseUrl, {});
  const first = await activateAs(activator, code, "anything");
  t.is(first.status, 200, JSON.stringify(first.body));
  const renewed = await sessionCall(activator.baseUrl, first.body.licenseToken, "renew");
  t.is(renewed.status, 200, JSON.stringify(renewed.body));
  t.deepEqual(licenseClaimsOf(renewed.body.licenseToken).prd, [productId], "renewed with the kept ids");

  const product = await rest(changer.baseUrl, "GET", `${PRODUCTS}/${productId}`);
  const renamed = `${product.body.productCode}-LATER`;
  await renameProduct(changer, productId, renamed, "3");
  const ruled = await rest(changer.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, {
    activationPolicy: { requireProductCode: true },
  });
  t.is(ruled.status, 200, JSON.stringify(ruled.body));
  assertRefused(t, await activateAs(activator, code, "anything"), "no product's code");
  assertRefused(t, await activateAs(activator, code, `${product.body.productCode}:1`), "the old code");
  const after = await activateAs(activator, code, `${renamed}:3`);
  t.is(after.status, 200, JSON.stringify(after.body));
  t.deepEqual(licenseClaimsOf(after.body.licenseToken).prd, [productId]);
});

each("an entitlement of several products: the license names them all, in order, from the kept ids", async (t, mode) => {
  const { changer, activator } = t.context.pairs[mode];
  const suffix = Math.random().toString(36).slice(2, 10);
  const productIds: string[] = [];
  for (const name of ["B", "A", "C"]) {
    const created = await rest(changer.baseUrl, "POST", PRODUCTS, { productCode: `MULTI-${name}-${suffix}`, name });
    productIds.push(created.body.id);
  }
  const entitlement = await rest(changer.baseUrl, "POST", ENTITLEMENTS, { name: `Multi ${suffix}`, productIds });
  t.is(entitlement.status, 200, JSON.stringify(entitlement.body));
  const issued = await rest(
    changer.baseUrl,
    "POST",
    `/api/v1/provision/operational/entitlement/${entitlement.body.id}/activation-codes`,
    { useEntitlementMaxActivations: true },
  );
  for (let round = 0; round < 3; round++) {
    const activated = await activateAs(activator, issued.body.activationCode, "");
    t.is(activated.status, 200, JSON.stringify(activated.body));
    t.deepEqual(licenseClaimsOf(activated.body.licenseToken).prd, productIds, `activation ${round + 1}`);
    const renewed = await sessionCall(activator.baseUrl, activated.body.licenseToken, "renew");
    t.deepEqual(licenseClaimsOf(renewed.body.licenseToken).prd, productIds, `renewal ${round + 1}`);
  }
});
