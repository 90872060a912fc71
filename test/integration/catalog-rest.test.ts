import { randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { steppingClock } from "../support/manual-clock.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

const PRODUCT_FIELDS = [
  "id",
  "status",
  "providerId",
  "name",
  "description",
  "productCode",
  "productVersion",
  "expirationDate",
  "externalId",
  "features",
  "monitoredAssets",
  "productInformation",
  "propertyValues",
  "isDeleted",
  "createdAt",
  "updatedAt",
  "revisionNumber",
  "isLocked",
  "productMetaData",
  "productLicenseData",
];

test.before(async (t) => {
  t.context.server = await startTestServer({ clock: steppingClock() });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

async function createProduct(t: { context: { server: TestServer } }, body: Record<string, unknown>) {
  return rest(t.context.server.baseUrl, "POST", PRODUCTS, body);
}

test("create answers the product with every field of the spec's Product table", async (t) => {
  const { status, body } = await createProduct(t, {
    productCode: "CREATE-1",
    productVersion: "2.0",
    name: "Create One",
    description: "first",
    externalId: "ext-1",
  });
  t.is(status, 200);
  t.deepEqual(Object.keys(body).sort(), [...PRODUCT_FIELDS].sort());
  t.regex(body.id, /^[0-9a-f-]{36}$/);
  t.like(body, {
    productCode: "CREATE-1",
    productVersion: "2.0",
    name: "Create One",
    description: "first",
    externalId: "ext-1",
    status: 2,
    revisionNumber: 1,
    isDeleted: false,
    isLocked: false,
    expirationDate: null,
    productInformation: null,
  });
  t.deepEqual(body.features, []);
  t.regex(body.createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
});

test("create requires productCode and enforces both uniqueness rules", async (t) => {
  const missing = await createProduct(t, { name: "no code" });
  t.is(missing.status, 400);
  t.is(missing.headers.get("content-type"), "application/problem+json");
  t.deepEqual(missing.body.errors, [{ field: "productCode", message: "is required" }]);

  t.is((await createProduct(t, { productCode: "UNIQ", productVersion: "1" })).status, 200);
  const sameCode = await createProduct(t, { productCode: "UNIQ", productVersion: "2" });
  t.is(sameCode.status, 409);
  t.is(sameCode.body.type, "urn:provision:problem:product-code-taken");
  const samePair = await createProduct(t, { productCode: "UNIQ", productVersion: "1" });
  t.is(samePair.status, 409);
  t.is((await createProduct(t, { productCode: "uniq", productVersion: "1" })).status, 200, "codes are case-sensitive");
});

test("get answers one product and 404 for an unknown id", async (t) => {
  const created = await createProduct(t, { productCode: "GET-1" });
  const found = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
  t.is(found.status, 200);
  t.is(found.body.productCode, "GET-1");
  const missing = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/4b0c7c8e-0000-4000-8000-000000000000`);
  t.is(missing.status, 404);
  t.is(missing.body.status, 404);
  t.is(missing.body.instance, `${PRODUCTS}/4b0c7c8e-0000-4000-8000-000000000000`);
  const malformed = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/not-a-uuid`);
  t.is(malformed.status, 400);
});

test("update changes only the fields sent, increments revisionNumber and moves updatedAt", async (t) => {
  const created = await createProduct(t, { productCode: "UPD-1", name: "Before", description: "kept" });
  const path = `${PRODUCTS}/${created.body.id}`;
  const updated = await rest(t.context.server.baseUrl, "PUT", path, {
    name: "After",
    expirationDate: "2027-03-01T10:00:00+02:00",
    productInformation: { displayVersion: "1.0 LTS", supportUrl: "https://example.test/support" },
    productMetaData: "meta",
    propertyValues: { color: { key: "color", value: "blue", metadata: [{ key: "source", value: "crm" }] } },
    unknownField: "ignored",
  });
  t.is(updated.status, 200);
  t.like(updated.body, {
    name: "After",
    description: "kept",
    productCode: "UPD-1",
    expirationDate: "2027-03-01T08:00:00Z",
    productMetaData: "meta",
    revisionNumber: 2,
  });
  t.is(updated.body.productInformation.displayVersion, "1.0 LTS");
  t.is(updated.body.productInformation.downloadUrl, "");
  t.deepEqual(updated.body.propertyValues.color, {
    key: "color",
    value: "blue",
    metadata: [{ key: "source", value: "crm" }],
  });
  t.true(Date.parse(updated.body.updatedAt) > Date.parse(created.body.updatedAt));
  t.is(updated.body.createdAt, created.body.createdAt);

  const merged = await rest(t.context.server.baseUrl, "PUT", path, {
    propertyValues: { size: { key: "size", value: "L" } },
    clearExpirationDate: true,
  });
  t.is(merged.body.revisionNumber, 3);
  t.is(merged.body.expirationDate, null);
  t.deepEqual(Object.keys(merged.body.propertyValues).sort(), ["color", "size"]);

  const removed = await rest(t.context.server.baseUrl, "PUT", path, { removePropertyValueKeys: ["color"] });
  t.deepEqual(Object.keys(removed.body.propertyValues), ["size"]);
  t.is(removed.body.revisionNumber, 4);

  const unchanged = await rest(t.context.server.baseUrl, "PUT", path, { name: "After" });
  t.is(unchanged.body.revisionNumber, 4, "a write that changes nothing is not a new revision");
});

test("update upserts features by id or featureCode and keeps the others", async (t) => {
  const created = await createProduct(t, { productCode: "UPD-FEAT" });
  const path = `${PRODUCTS}/${created.body.id}`;
  const first = await rest(t.context.server.baseUrl, "PUT", path, {
    features: [
      { featureCode: "export", name: "Export", isEnabled: true },
      { featureCode: "print", name: "Print" },
    ],
  });
  t.is(first.status, 200);
  t.deepEqual(first.body.features.map((feature: { featureCode: string }) => feature.featureCode).sort(), [
    "export",
    "print",
  ]);
  const exportId = first.body.features.find((feature: { featureCode: string }) => feature.featureCode === "export").id;

  const second = await rest(t.context.server.baseUrl, "PUT", path, {
    features: [{ id: exportId, featureCode: "export", name: "Export PDF", isEnabled: false }],
  });
  const exported = second.body.features.find((feature: { id: string }) => feature.id === exportId);
  t.like(exported, { name: "Export PDF", isEnabled: false, revisionNumber: 2 });
  t.is(second.body.features.length, 2);

  const deleted = await rest(t.context.server.baseUrl, "PUT", path, {
    features: [{ featureCode: "print", isDeleted: true }],
  });
  t.deepEqual(
    deleted.body.features.map((feature: { featureCode: string }) => feature.featureCode),
    ["export"],
  );

  const foreign = await rest(t.context.server.baseUrl, "PUT", path, {
    features: [{ id: "7d2f1c8e-0000-4000-8000-000000000000" }],
  });
  t.is(foreign.status, 400);
  t.is(foreign.body.errors[0].field, "features[0].id");
});

test("update refuses two elements naming one feature, and deleting a feature it lacks changes nothing", async (t) => {
  const path = `${PRODUCTS}/${(await createProduct(t, { productCode: "UPD-TWICE" })).body.id}`;
  const created = await rest(t.context.server.baseUrl, "PUT", path, { features: [{ featureCode: "D1", name: "d" }] });
  const featureId = created.body.features[0].id;
  for (const features of [
    [
      { featureCode: "D1", name: "first" },
      { featureCode: "D1", name: "second" },
    ],
    [
      { featureCode: "D1", name: "d" },
      { id: featureId, name: "second" },
    ],
    [
      { featureCode: "NEW", name: "first" },
      { featureCode: "NEW", name: "second" },
    ],
  ]) {
    const refused = await rest(t.context.server.baseUrl, "PUT", path, { features });
    t.is(refused.status, 400, JSON.stringify(features));
    t.is(refused.body.errors[0].field, "features[1]");
    t.regex(refused.body.errors[0].message, /names the same feature as features\[0\]/);
  }

  const ghost = await rest(t.context.server.baseUrl, "PUT", path, {
    features: [{ featureCode: "GHOST", isDeleted: true }],
  });
  t.is(ghost.status, 200);
  t.is(ghost.body.revisionNumber, created.body.revisionNumber, "nothing changed");
  const added = await rest(t.context.server.baseUrl, "POST", `${path}/features`, { featureCode: "GHOST" });
  t.is(added.status, 200);
  t.is(added.body.revisionNumber, 1, "a new feature, not one kept hidden");
});

test("update to another product's code answers 409 and changes nothing", async (t) => {
  await createProduct(t, { productCode: "TAKEN" });
  const mine = await createProduct(t, { productCode: "MINE", name: "mine" });
  const clash = await rest(t.context.server.baseUrl, "PUT", `${PRODUCTS}/${mine.body.id}`, {
    productCode: "TAKEN",
    name: "renamed",
  });
  t.is(clash.status, 409);
  const after = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/${mine.body.id}`);
  t.like(after.body, { productCode: "MINE", name: "mine", revisionNumber: 1 });
});

test("features: add and update, and they appear on the product", async (t) => {
  const product = await createProduct(t, { productCode: "FEAT-1" });
  const base = `${PRODUCTS}/${product.body.id}/features`;
  const added = await rest(t.context.server.baseUrl, "POST", base, {
    featureCode: "sync",
    name: "Sync",
    moduleName: "core",
    value: "10",
    units: "devices",
    isAvailableDuringTrialPeriod: true,
    canModifyEnabledOnEntitlement: true,
  });
  t.is(added.status, 200);
  t.like(added.body, {
    featureCode: "sync",
    name: "Sync",
    moduleName: "core",
    value: "10",
    units: "devices",
    isEnabled: true,
    isAvailableDuringTrialPeriod: true,
    isAvailableDuringGracePeriod: false,
    canModifyEnabledOnEntitlement: true,
    revisionNumber: 1,
    isDeleted: false,
  });
  t.truthy(added.body.creationTimeStamp);

  const duplicate = await rest(t.context.server.baseUrl, "POST", base, { featureCode: "sync" });
  t.is(duplicate.status, 409);

  const updated = await rest(t.context.server.baseUrl, "PUT", `${base}/${added.body.id}`, {
    name: "Cloud Sync",
    isEnabled: false,
    featurePath: "core/sync",
  });
  t.is(updated.status, 200);
  t.like(updated.body, {
    name: "Cloud Sync",
    isEnabled: false,
    featurePath: "core/sync",
    value: "10",
    revisionNumber: 2,
  });

  const reread = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/${product.body.id}`);
  t.is(reread.body.features.length, 1);
  t.like(reread.body.features[0], { id: added.body.id, name: "Cloud Sync" });
  t.is(reread.body.revisionNumber, 3, "adding and changing a feature are changes to the product");

  const missing = await rest(t.context.server.baseUrl, "PUT", `${base}/9a0c7c8e-0000-4000-8000-000000000000`, {
    name: "x",
  });
  t.is(missing.status, 404);
});

const meteredAsset = {
  metricName: "api-calls",
  name: "API calls",
  unit: "call",
  category: "usage",
  numberFormat: "#,##0",
  metricType: 1,
  allowedBackDatingTolerance: "P1DT2H",
  meteredUsage: {
    lastReportedOverageSeverityStatus: 1,
    consumptionPeriod: "P1M",
    accumulationMethod: 0,
    suspendUntilTimeStamp: "2026-06-01T00:00:00Z",
    usageTiers: [
      {
        name: "included",
        startUsage: 0,
        endUsage: 1000,
        baseCredits: 0,
        creditsPerUnitOfConsumption: 0,
        quotaUsageLevel: 1,
        quotaUsagePolicy: 1,
      },
      {
        name: "overage",
        startUsage: 1000,
        endUsage: 0,
        baseCredits: 12.5,
        creditsPerUnitOfConsumption: 0.1,
        quotaUsageLevel: 4,
        quotaUsagePolicy: 2,
      },
    ],
  },
};

const balanceAsset = {
  metricName: "credits",
  name: "Render credits",
  metricType: 2,
  allowedBackDatingTolerance: "3600s",
  balanceUsage: {
    name: "render",
    unit: "credit",
    creditsUsed: 12.25,
    totalCredits: 500,
    cumulativeCreditsUsed: 1234.5,
    initialCreditAmount: 500,
    isUnlimitedCredits: false,
    autoBalanceCronSchedule: "0 0 1 * *",
    shouldAutoBalanceTransferCurrentCredits: true,
    maxAutoBalanceCreditTransferAmount: 100,
    autoBalanceCreditAmount: 250,
    overageSeverityStatus: 1,
    lastDeposit: "2026-01-01T00:00:00Z",
    usageQuota: [
      { name: "low", endUsage: 80, quotaUsageLevel: 2 },
      { name: "empty", endUsage: 100, quotaUsageLevel: 3 },
    ],
  },
};

test("monitored resources keep metered and balance usage exactly and appear on the product", async (t) => {
  const product = await createProduct(t, { productCode: "ASSET-1" });
  const path = `${PRODUCTS}/${product.body.id}/monitored-resources`;
  const metered = await rest(t.context.server.baseUrl, "POST", path, meteredAsset);
  t.is(metered.status, 200);
  t.is(metered.body.allowedBackDatingTolerance, "1.02:00:00");
  t.is(metered.body.productId, product.body.id);
  t.regex(metered.body.meteredUsageId, /^[0-9a-f-]{36}$/);
  t.is(metered.body.meteredUsage.id, metered.body.meteredUsageId);
  t.deepEqual(metered.body.meteredUsage.usageTiers, meteredAsset.meteredUsage.usageTiers);
  t.like(metered.body.meteredUsage, { consumptionPeriod: "P1M", suspendUntilTimeStamp: "2026-06-01T00:00:00Z" });
  t.is(metered.body.balanceUsage, null);

  const balance = await rest(t.context.server.baseUrl, "POST", path, balanceAsset);
  t.is(balance.status, 200);
  t.is(balance.body.allowedBackDatingTolerance, "01:00:00");
  const { id: _id, lastAutoBalanceDate, suspendUntilTimeStamp, ...storedBalance } = balance.body.balanceUsage;
  t.deepEqual(storedBalance, { ...balanceAsset.balanceUsage, description: "", numberFormat: "" });
  t.is(lastAutoBalanceDate, null);
  t.is(suspendUntilTimeStamp, null);

  const duplicate = await rest(t.context.server.baseUrl, "POST", path, { metricName: "api-calls" });
  t.is(duplicate.status, 409);

  const changedTiers = [{ ...meteredAsset.meteredUsage.usageTiers[0], endUsage: 5000 }];
  const updated = await rest(t.context.server.baseUrl, "PUT", path, {
    ...meteredAsset,
    name: "API requests",
    meteredUsage: { ...meteredAsset.meteredUsage, usageTiers: changedTiers },
  });
  t.is(updated.status, 200);
  t.is(updated.body.id, metered.body.id, "found by metricName");
  t.is(updated.body.meteredUsageId, metered.body.meteredUsageId, "keeps the metered usage id");
  t.deepEqual(updated.body.meteredUsage.usageTiers, changedTiers);

  const reread = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/${product.body.id}`);
  t.deepEqual(
    reread.body.monitoredAssets.map((asset: { name: string }) => asset.name),
    ["API requests", "Render credits"],
  );

  const unknown = await rest(t.context.server.baseUrl, "PUT", path, { ...meteredAsset, metricName: "nope" });
  t.is(unknown.status, 404);
  const invalid = await rest(t.context.server.baseUrl, "POST", path, { metricName: "bad", metricType: 9 });
  t.is(invalid.status, 400);
  t.is(invalid.body.errors[0].field, "metricType");
  const badSpan = await rest(t.context.server.baseUrl, "POST", path, {
    metricName: "bad-span",
    allowedBackDatingTolerance: "P1M",
  });
  t.is(badSpan.status, 400);
  t.is(badSpan.body.errors[0].field, "allowedBackDatingTolerance");
});

test("a monitored asset's amounts must be finite and not negative, and its tolerance not negative", async (t) => {
  const product = await createProduct(t, { productCode: "ASSET-NEGATIVE" });
  const path = `${PRODUCTS}/${product.body.id}/monitored-resources`;
  const refused = await rest(t.context.server.baseUrl, "POST", path, {
    ...balanceAsset,
    metricName: "negative",
    allowedBackDatingTolerance: "-01:00:00",
    balanceUsage: {
      ...balanceAsset.balanceUsage,
      totalCredits: -100,
      autoBalanceCreditAmount: -1,
      usageQuota: [{ name: "low", endUsage: -5, quotaUsageLevel: 2 }],
    },
  });
  t.is(refused.status, 400, JSON.stringify(refused.body));
  t.deepEqual(refused.body.errors.map((error: { field: string }) => error.field).sort(), [
    "allowedBackDatingTolerance",
    "balanceUsage.autoBalanceCreditAmount",
    "balanceUsage.totalCredits",
    "balanceUsage.usageQuota[0].endUsage",
  ]);
  for (const [tier, field] of [
    [{ startUsage: -1, endUsage: 10 }, "startUsage"],
    [{ startUsage: 0, endUsage: "Infinity" }, "endUsage"],
    [{ startUsage: 0, baseCredits: -2 }, "baseCredits"],
  ] as const) {
    const tiers = await rest(t.context.server.baseUrl, "POST", path, {
      ...meteredAsset,
      metricName: "negative-tier",
      meteredUsage: { ...meteredAsset.meteredUsage, usageTiers: [{ name: "t", ...tier }] },
    });
    t.is(tiers.status, 400, JSON.stringify(tiers.body));
    t.deepEqual(
      tiers.body.errors.map((error: { field: string }) => error.field),
      [`meteredUsage.usageTiers[0].${field}`],
    );
  }
});

test("usage tiers are bands one after another: no overlap, no gap, only the highest unbounded", async (t) => {
  const path = `${PRODUCTS}/${(await createProduct(t, { productCode: "BANDS" })).body.id}/monitored-resources`;
  const withTiers = (metricName: string, usageTiers: Record<string, unknown>[]) =>
    rest(t.context.server.baseUrl, "POST", path, {
      ...meteredAsset,
      metricName,
      meteredUsage: { ...meteredAsset.meteredUsage, usageTiers },
    });
  const tier = (name: string, startUsage: number, endUsage: number, quotaUsagePolicy = 1) => ({
    name,
    startUsage,
    endUsage,
    quotaUsageLevel: 1,
    quotaUsagePolicy,
  });
  const field = "meteredUsage.usageTiers";
  for (const [what, tiers, errors] of [
    ["overlapping", [tier("a", 0, 100), tier("b", 50, 200)], [[`${field}[1].startUsage`, "must be 100"]]],
    ["with a gap", [tier("a", 0, 100), tier("b", 150, 200)], [[`${field}[1].startUsage`, "must be 100"]]],
    ["starting together", [tier("a", 0, 100), tier("b", 0, 50)], [[`${field}[1].startUsage`, "must be 100"]]],
    ["unbounded below another", [tier("a", 0, 0), tier("b", 100, 0)], [[`${field}[0].endUsage`, "must be set"]]],
    ["ending where it starts", [tier("a", 10, 10)], [[`${field}[0].endUsage`, "must be more than startUsage"]]],
    ["sharing a name", [tier("a", 0, 100), tier("a", 100, 0)], [[`${field}[1].name`, "must differ"]]],
  ] as const) {
    const refused = await withTiers("refused", [...tiers]);
    t.is(refused.status, 400, what);
    const answered = refused.body.errors.map((error: { field: string; message: string }) => [
      error.field,
      error.message.slice(0, errors[0][1].length),
    ]);
    t.deepEqual(answered, errors, what);
  }
  const unordered = await withTiers("bands", [
    tier("block", 120, 0, 3),
    tier("included", 0, 100),
    tier("warn", 100, 120),
  ]);
  t.is(unordered.status, 200, "given in any order, they are bands once sorted");
  const quota = await rest(t.context.server.baseUrl, "POST", path, {
    metricName: "credits-over",
    metricType: 2,
    balanceUsage: { totalCredits: 10, usageQuota: [{ name: "over", endUsage: 150, quotaUsageLevel: 2 }] },
  });
  t.is(quota.status, 400);
  t.is(quota.body.errors[0].field, "balanceUsage.usageQuota[0].endUsage");
});

test("import creates and replaces products, all or nothing", async (t) => {
  const existing = await createProduct(t, { productCode: "IMP-EXISTING", name: "old name" });
  const imported = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/import`, [
    {
      productCode: "IMP-EXISTING",
      productVersion: "3",
      name: "new name",
      status: 5,
      features: [{ featureCode: "a", name: "A", isEnabled: true }],
    },
    {
      id: "5e1d3b9a-1111-4222-8333-444455556666",
      productCode: "IMP-NEW",
      name: "brand new",
      monitoredAssets: [meteredAsset],
      propertyValues: { tier: { key: "tier", value: "gold" } },
    },
  ]);
  t.is(imported.status, 200);
  t.is(imported.body.createdCount, 1);
  t.is(imported.body.updatedCount, 1);
  const [replaced, created] = imported.body.products;
  t.like(replaced, { id: existing.body.id, name: "new name", productVersion: "3", status: 5, revisionNumber: 2 });
  t.is(replaced.features[0].featureCode, "a");
  t.like(created, { id: "5e1d3b9a-1111-4222-8333-444455556666", productCode: "IMP-NEW", revisionNumber: 1 });
  t.deepEqual(created.monitoredAssets[0].meteredUsage.usageTiers, meteredAsset.meteredUsage.usageTiers);

  const failing = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/import`, [
    { productCode: "IMP-ROLLBACK" },
    { productCode: "IMP-ROLLBACK-2", id: existing.body.id },
  ]);
  t.is(failing.status, 409);
  const listed = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}?filter=productCode~IMP-ROLLBACK`);
  t.is(listed.body.totalCount, 0, "nothing of a failed import is kept");

  const invalid = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/import`, [
    { productCode: "DUP" },
    { productCode: "DUP" },
    { name: "no code" },
  ]);
  t.is(invalid.status, 400);
  t.deepEqual(
    invalid.body.errors.map((error: { field: string }) => error.field),
    ["products[1].productCode", "products[2].productCode"],
  );

  const sameId = "5e1d3b9a-1111-4222-8333-777788889999";
  const repeated = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/import`, [
    { id: sameId, productCode: "IMP-ID-1" },
    { id: sameId.toUpperCase(), productCode: "IMP-ID-2" },
    { productCode: "IMP-FEAT", features: [{ featureCode: "f" }, { featureCode: "f " }] },
  ]);
  t.is(repeated.status, 400, JSON.stringify(repeated.body));
  t.deepEqual(
    repeated.body.errors.map((error: { field: string }) => error.field),
    ["products[1].id"],
  );
  const featureRepeated = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/import`, [
    { productCode: "IMP-FEAT", features: [{ featureCode: "f" }, { featureCode: "f " }] },
  ]);
  t.is(featureRepeated.status, 400);
  t.is(featureRepeated.body.errors[0].field, "products[0].features[1]");
});

test("list pages, filters and sorts", async (t) => {
  const { baseUrl } = t.context.server;
  for (let index = 1; index <= 7; index++) {
    const code = `LIST-${String(index).padStart(2, "0")}`;
    await createProduct(t, {
      productCode: code,
      name: index % 2 ? "Odd Editor" : "Even Viewer",
      externalId: `x${index}`,
    });
  }
  const page = await rest(
    baseUrl,
    "GET",
    `${PRODUCTS}?pageNumber=2&pageSize=3&filter=productCode~LIST-&sortOrder=productCode`,
  );
  t.is(page.status, 200);
  t.like(page.body, {
    currentPage: 2,
    pageSize: 3,
    from: 4,
    to: 6,
    totalCount: 7,
    totalPages: 3,
    hasPreviousPage: true,
    hasNextPage: true,
  });
  t.deepEqual(
    page.body.items.map((item: { productCode: string }) => item.productCode),
    ["LIST-04", "LIST-05", "LIST-06"],
  );

  const snake = await rest(
    baseUrl,
    "GET",
    `${PRODUCTS}?page_number=3&page_size=3&filter=productCode~LIST-&sort_order=-productCode`,
  );
  t.deepEqual(
    snake.body.items.map((item: { productCode: string }) => item.productCode),
    ["LIST-01"],
  );
  t.like(snake.body, { hasNextPage: false, from: 7, to: 7 });

  const text = await rest(baseUrl, "GET", `${PRODUCTS}?filter=${encodeURIComponent('"even viewer" productCode~LIST')}`);
  t.deepEqual(
    text.body.items.map((item: { productCode: string }) => item.productCode),
    ["LIST-02", "LIST-04", "LIST-06"],
  );

  const compare = await rest(baseUrl, "GET", `${PRODUCTS}?filter=${encodeURIComponent("externalId=x3 status=2")}`);
  t.deepEqual(
    compare.body.items.map((item: { productCode: string }) => item.productCode),
    ["LIST-03"],
  );

  const injection = await rest(baseUrl, "GET", `${PRODUCTS}?filter=${encodeURIComponent('name="x\' OR 1=1 --"')}`);
  t.is(injection.status, 200);
  t.is(injection.body.totalCount, 0);

  const badField = await rest(baseUrl, "GET", `${PRODUCTS}?filter=password=1`);
  t.is(badField.status, 400);
  t.is(badField.body.errors[0].field, "filter");
  const badSort = await rest(baseUrl, "GET", `${PRODUCTS}?sortOrder=secret`);
  t.is(badSort.status, 400);
  const tooBig = await rest(baseUrl, "GET", `${PRODUCTS}?pageSize=101`);
  t.is(tooBig.status, 400);
  const badType = await rest(baseUrl, "GET", `${PRODUCTS}?pageSize=ten`);
  t.is(badType.status, 400);
  t.is(badType.body.errors[0].field, "pageSize");
});

test("soft-deleted products are listed only when the filter names isDeleted", async (t) => {
  const { baseUrl } = t.context.server;
  await rest(baseUrl, "POST", `${PRODUCTS}/import`, [{ productCode: "GONE-1", isDeleted: true }]);
  const hidden = await rest(baseUrl, "GET", `${PRODUCTS}?filter=productCode=GONE-1`);
  t.is(hidden.body.totalCount, 0);
  const shown = await rest(
    baseUrl,
    "GET",
    `${PRODUCTS}?filter=${encodeURIComponent("productCode=GONE-1 isDeleted=true")}`,
  );
  t.is(shown.body.totalCount, 1);
});

test("a locked product refuses changes with 409", async (t) => {
  const { baseUrl } = t.context.server;
  const imported = await rest(baseUrl, "POST", `${PRODUCTS}/import`, [{ productCode: "LOCKED-1", isLocked: true }]);
  const id = imported.body.products[0].id;
  const refused = await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { name: "x" });
  t.is(refused.status, 409);
  t.is(refused.body.type, "urn:provision:problem:product-locked");
  const feature = await rest(baseUrl, "POST", `${PRODUCTS}/${id}/features`, { featureCode: "f" });
  t.is(feature.status, 409);
});

test("an imported id naming another of the provider's products is refused, whether its code exists or not", async (t) => {
  const { baseUrl } = t.context.server;
  const a = (await createProduct(t, { productCode: "IDS-A", name: "A" })).body;
  const b = (await createProduct(t, { productCode: "IDS-B", name: "B" })).body;
  const importing = (products: Record<string, unknown>[]) => rest(baseUrl, "POST", `${PRODUCTS}/import`, products);

  const overB = await importing([{ id: a.id, productCode: "IDS-B", name: "B as A" }]);
  t.is(overB.status, 409, "A's id with B's code would replace B in A's name");
  t.is(overB.body.type, "urn:provision:problem:product-id-taken");
  const asNew = await importing([{ id: b.id, productCode: "IDS-NEW" }]);
  t.is(asNew.status, 409, "B's id for a new code");
  for (const [product, name] of [
    [a, "A"],
    [b, "B"],
  ] as const) {
    t.like((await rest(baseUrl, "GET", `${PRODUCTS}/${product.id}`)).body, { name, revisionNumber: 1 });
  }

  const byCode = await importing([{ id: randomUUID(), productCode: "IDS-B", name: "B replaced" }]);
  t.is(byCode.status, 200, "a free id beside an existing code: the code decides, as documented");
  t.like((await rest(baseUrl, "GET", `${PRODUCTS}/${b.id}`)).body, { name: "B replaced", revisionNumber: 2 });
});
