import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import mysql from "mysql2/promise";
import { steppingClock } from "../support/manual-clock.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, TEST_DATABASE_URL, type TestServer } from "../support/test-server.js";

type Mode = "MySQL" | "SQLite";
const MODES: Mode[] = ["MySQL", "SQLite"];

const test = anyTest as TestFn<{ servers: Record<Mode, TestServer> }>;

function temporarySqliteFile(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "provision-edge-")), "provision.sqlite");
}

test.before(async (t) => {
  const [mysqlServer, sqliteServer] = await Promise.all([
    startTestServer({ clock: steppingClock() }),
    startTestServer({ clock: steppingClock(), embedded: { file: temporarySqliteFile() } }),
  ]);
  t.context.servers = { MySQL: mysqlServer, SQLite: sqliteServer };
});

test.after.always(async (t) => {
  await Promise.all(Object.values(t.context.servers ?? {}).map((server) => server.close()));
});

// --- helpers ---------------------------------------------------------------------------------------------

/** Creates a product and answers its body; any status but 200 fails the test with the problem seen. */
async function createProduct(baseUrl: string, body: Record<string, unknown>) {
  const response = await rest(baseUrl, "POST", PRODUCTS, body);
  if (response.status !== 200) throw new Error(`create answered ${response.status}: ${JSON.stringify(response.body)}`);
  return response.body;
}

async function getProduct(baseUrl: string, id: string) {
  const response = await rest(baseUrl, "GET", `${PRODUCTS}/${id}`);
  if (response.status !== 200) throw new Error(`get answered ${response.status}: ${JSON.stringify(response.body)}`);
  return response.body;
}

/** The list answer for a filter (and optional sort), up to 100 items. */
function list(baseUrl: string, filter: string, sortOrder?: string) {
  const sort = sortOrder ? `&sortOrder=${encodeURIComponent(sortOrder)}` : "";
  return rest(baseUrl, "GET", `${PRODUCTS}?pageSize=100&filter=${encodeURIComponent(filter)}${sort}`);
}

/** The product codes a filter lists, in list order. */
async function listedCodes(baseUrl: string, filter: string, sortOrder?: string): Promise<string[]> {
  const response = await list(baseUrl, filter, sortOrder);
  if (response.status !== 200) throw new Error(`list answered ${response.status}: ${JSON.stringify(response.body)}`);
  return response.body.items.map((item: { productCode: string }) => item.productCode);
}

/** The fields a 400 problem names. */
function problemFields(body: { errors?: { field: string }[] }): string[] {
  return (body.errors ?? []).map((error) => error.field);
}

function importProducts(baseUrl: string, products: Record<string, unknown>[]) {
  return rest(baseUrl, "POST", `${PRODUCTS}/import`, products);
}

function featureByCode(product: { features: { featureCode: string }[] }, code: string): any {
  return product.features.find((feature) => feature.featureCode === code);
}

// --- 1. expiration dates ----------------------------------------------------------------------------------

for (const mode of MODES) {
  test(`${mode}: expirationDate is stored truncated to the millisecond and a filter with the finer value finds it`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "EXP-MS" });
    const updated = await rest(baseUrl, "PUT", `${PRODUCTS}/${product.id}`, {
      expirationDate: "2026-03-01T10:00:00.9996Z",
    });
    t.is(updated.status, 200);
    t.is(updated.body.expirationDate, "2026-03-01T10:00:00.999Z");
    t.is((await getProduct(baseUrl, product.id)).expirationDate, "2026-03-01T10:00:00.999Z");

    const filterBase = "productCode=EXP-MS expirationDate=";
    t.deepEqual(await listedCodes(baseUrl, `${filterBase}2026-03-01T10:00:00.9996Z`), ["EXP-MS"]);
    t.deepEqual(await listedCodes(baseUrl, `${filterBase}2026-03-01T10:00:00.999Z`), ["EXP-MS"]);
    t.deepEqual(await listedCodes(baseUrl, `${filterBase}2026-03-01T10:00:01Z`), []);
  });

  test(`${mode}: expirationDate 9999-12-31T23:59:59.9999Z is accepted and reads back in get and list`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "EXP-MAX" });
    const updated = await rest(baseUrl, "PUT", `${PRODUCTS}/${product.id}`, {
      expirationDate: "9999-12-31T23:59:59.9999Z",
    });
    t.is(updated.status, 200);
    t.is(updated.body.expirationDate, "9999-12-31T23:59:59.999Z");
    t.is((await getProduct(baseUrl, product.id)).expirationDate, "9999-12-31T23:59:59.999Z");
    const listed = await list(baseUrl, "productCode=EXP-MAX");
    t.is(listed.status, 200);
    t.is(listed.body.items[0]?.expirationDate, "9999-12-31T23:59:59.999Z");
  });

  test(`${mode}: an expirationDate before the year 1000 answers 400 naming expirationDate and writes nothing`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "EXP-OLD", name: "old" });
    const refused = await rest(baseUrl, "PUT", `${PRODUCTS}/${product.id}`, {
      name: "renamed",
      expirationDate: "0049-07-01T00:00:00Z",
    });
    t.is(refused.status, 400);
    t.is(refused.headers.get("content-type"), "application/problem+json");
    t.deepEqual(problemFields(refused.body), ["expirationDate"]);
    t.like(await getProduct(baseUrl, product.id), { name: "old", expirationDate: null, revisionNumber: 1 });
  });

  test(`${mode}: an import with an expirationDate before the year 1000 answers 400 naming it and creates nothing`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const refused = await importProducts(baseUrl, [
      { productCode: "EXP-IMP-1", expirationDate: "0049-07-01T00:00:00Z" },
      { productCode: "EXP-IMP-2" },
    ]);
    t.is(refused.status, 400);
    t.deepEqual(problemFields(refused.body), ["products[0].expirationDate"]);
    t.deepEqual(await listedCodes(baseUrl, "productCode~EXP-IMP-"), []);
  });
}

// --- 2. exact text compare, Unicode case folding, code-point sort -----------------------------------------

for (const mode of MODES) {
  test(`${mode}: text filters compare exactly, contains folds Unicode case, and name sorts by code point`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const names: Record<string, string> = {
      "TXT-1": "café",
      "TXT-2": "CAFE",
      "TXT-3": "café ",
      "TXT-4": "rocket 🚀",
      "TXT-5": "Éclair Studio",
    };
    for (const [productCode, name] of Object.entries(names)) await createProduct(baseUrl, { productCode, name });
    const scoped = (filter: string) => listedCodes(baseUrl, `productCode~TXT- ${filter}`, "productCode");

    t.deepEqual(await scoped("name=cafe"), [], "neither case nor accents are folded by =");
    t.deepEqual(await scoped("name=café"), ["TXT-1"], "a trailing space counts");
    t.deepEqual(await scoped('name="café "'), ["TXT-3"]);
    t.deepEqual(await scoped('name="rocket 🐛"'), [], "one emoji is not another");
    t.deepEqual(await scoped("name~🚀"), ["TXT-4"]);

    t.deepEqual(await scoped("éclair"), ["TXT-5"], "free text folds case");
    t.deepEqual(await scoped("ÉCLAIR"), ["TXT-5"]);
    t.deepEqual(await scoped("name~ÉCLAIR"), ["TXT-5"]);

    const sorted = await listedCodes(baseUrl, "productCode~TXT-", "name");
    t.deepEqual(
      sorted.map((code) => names[code]),
      ["CAFE", "café", "café ", "rocket 🚀", "Éclair Studio"],
      "code-point order",
    );
  });
}

// --- 3. latin1 MySQL database ---------------------------------------------------------------------------

test("MySQL: a database whose default charset is latin1 still stores emoji and CJK exactly", async (t) => {
  const name = `provision_latin1_${Date.now().toString(36)}_${process.pid}`;
  const admin = await mysql.createConnection({ uri: TEST_DATABASE_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET latin1`);
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  let server: TestServer | undefined;
  t.teardown(async () => {
    await server?.close();
    const connection = await mysql.createConnection({ uri: TEST_DATABASE_URL });
    await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await connection.end();
  });
  server = await startTestServer({ databaseUrl: url.toString() });

  const created = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: "L1-CJK",
    name: "日本語 😀",
    description: "説明 🚀",
  });
  t.is(created.status, 200);
  t.like(created.body, { name: "日本語 😀", description: "説明 🚀" });
  t.like(await getProduct(server.baseUrl, created.body.id), { name: "日本語 😀", description: "説明 🚀" });
  t.deepEqual(await listedCodes(server.baseUrl, 'name="日本語 😀"'), ["L1-CJK"]);
});

// --- 4. propertyValues size -----------------------------------------------------------------------------

/** One property value whose stored JSON is a little over `size` characters. */
function bigProperty(key: string, size: number) {
  return { [key]: { key, value: "x".repeat(size), metadata: [{ key: "source", value: "test" }] } };
}

for (const mode of MODES) {
  test(`${mode}: propertyValues over 64 KiB of JSON after the merge answer 400 naming propertyValues and change nothing`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "PV-BIG" });
    const productPath = `${PRODUCTS}/${product.id}`;
    for (const key of ["a", "b", "c", "d"]) {
      const accepted = await rest(baseUrl, "PUT", productPath, { propertyValues: bigProperty(key, 15_000) });
      t.is(accepted.status, 200, `${key} keeps the total under the limit`);
    }
    const before = await getProduct(baseUrl, product.id);
    t.is(before.revisionNumber, 5);

    const refused = await rest(baseUrl, "PUT", productPath, {
      name: "renamed",
      propertyValues: bigProperty("e", 6_000),
    });
    t.is(refused.status, 400);
    t.deepEqual(problemFields(refused.body), ["propertyValues"]);

    const after = await getProduct(baseUrl, product.id);
    t.like(after, { revisionNumber: 5, name: before.name, updatedAt: before.updatedAt });
    t.deepEqual(Object.keys(after.propertyValues).sort(), ["a", "b", "c", "d"]);
  });
}

// --- 5. monitored asset no-op update ----------------------------------------------------------------------

const meteredAsset = {
  metricName: "api-calls",
  name: "API calls",
  unit: "call",
  metricType: 1,
  allowedBackDatingTolerance: "P1D",
  meteredUsage: {
    consumptionPeriod: "P1M",
    usageTiers: [{ name: "included", startUsage: 0, endUsage: 1000, quotaUsageLevel: 1, quotaUsagePolicy: 1 }],
  },
};

for (const mode of MODES) {
  test(`${mode}: a monitored-asset PUT of the same definition leaves the product's revision and updatedAt alone`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "ASSET-NOOP" });
    const assetsPath = `${PRODUCTS}/${product.id}/monitored-resources`;
    const added = await rest(baseUrl, "POST", assetsPath, meteredAsset);
    t.is(added.status, 200);
    const before = await getProduct(baseUrl, product.id);

    const same = await rest(baseUrl, "PUT", assetsPath, meteredAsset);
    t.is(same.status, 200);
    t.is(same.body.id, added.body.id);
    const unchanged = await getProduct(baseUrl, product.id);
    t.is(unchanged.revisionNumber, before.revisionNumber);
    t.is(unchanged.updatedAt, before.updatedAt);

    const changed = await rest(baseUrl, "PUT", assetsPath, { ...meteredAsset, name: "API requests" });
    t.is(changed.status, 200);
    const after = await getProduct(baseUrl, product.id);
    t.is(after.revisionNumber, before.revisionNumber + 1);
    t.true(Date.parse(after.updatedAt) > Date.parse(before.updatedAt));
    t.is(after.monitoredAssets[0].name, "API requests");
  });
}

// --- 6-8. features ----------------------------------------------------------------------------------------

for (const mode of MODES) {
  test(`${mode}: adding a feature with a soft-deleted feature's code brings that feature back with the new fields`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "FEAT-REVIVE" });
    const featuresPath = `${PRODUCTS}/${product.id}/features`;
    const first = await rest(baseUrl, "POST", featuresPath, { featureCode: "sync", name: "Sync", units: "devices" });
    t.is(first.status, 200);
    const deleted = await rest(baseUrl, "PUT", `${PRODUCTS}/${product.id}`, {
      features: [{ id: first.body.id, isDeleted: true }],
    });
    t.is(deleted.status, 200);
    t.is(featureByCode(deleted.body, "sync"), undefined);

    const revived = await rest(baseUrl, "POST", featuresPath, { featureCode: "sync", name: "Cloud Sync", value: "5" });
    t.is(revived.status, 200);
    t.like(revived.body, { id: first.body.id, featureCode: "sync", name: "Cloud Sync", value: "5", isDeleted: false });
    const shown = await getProduct(baseUrl, product.id);
    t.is(shown.features.length, 1);
    t.like(shown.features[0], { id: first.body.id, name: "Cloud Sync", isDeleted: false });
  });

  test(`${mode}: a product PUT adds features enabled by default and keeps isEnabled of features it does not set`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "FEAT-ENABLED" });
    const productPath = `${PRODUCTS}/${product.id}`;
    const added = await rest(baseUrl, "PUT", productPath, { features: [{ featureCode: "NEW" }] });
    t.is(added.status, 200);
    t.is(featureByCode(added.body, "NEW").isEnabled, true);
    const id = featureByCode(added.body, "NEW").id;

    const disabled = await rest(baseUrl, "PUT", productPath, { features: [{ featureCode: "NEW", isEnabled: false }] });
    t.is(featureByCode(disabled.body, "NEW").isEnabled, false);

    const byCode = await rest(baseUrl, "PUT", productPath, { features: [{ featureCode: "NEW", name: "Renamed" }] });
    t.is(byCode.status, 200);
    t.like(featureByCode(byCode.body, "NEW"), { id, name: "Renamed", isEnabled: false });

    const byId = await rest(baseUrl, "PUT", productPath, { features: [{ id, featureCode: "NEW", units: "seats" }] });
    t.is(byId.status, 200);
    t.like(featureByCode(byId.body, "NEW"), { id, units: "seats", isEnabled: false });
    t.is(featureByCode(await getProduct(baseUrl, product.id), "NEW").isEnabled, false);
  });

  test(`${mode}: a product PUT giving a feature another feature's code answers 409 feature-code-taken and changes nothing`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "FEAT-CLASH" });
    const productPath = `${PRODUCTS}/${product.id}`;
    const seeded = await rest(baseUrl, "PUT", productPath, {
      features: [
        { featureCode: "A", name: "Alpha" },
        { featureCode: "B", name: "Beta" },
      ],
    });
    t.is(seeded.status, 200);
    const featureB = featureByCode(seeded.body, "B");

    const clash = await rest(baseUrl, "PUT", productPath, {
      name: "renamed",
      features: [{ id: featureB.id, featureCode: "A" }],
    });
    t.is(clash.status, 409);
    t.regex(clash.body.type, /feature-code-taken$/);
    t.regex(clash.body.detail, /"A"/);

    const after = await getProduct(baseUrl, product.id);
    t.is(after.revisionNumber, seeded.body.revisionNumber);
    t.is(after.name, seeded.body.name);
    t.deepEqual(
      after.features.map((feature: { id: string; featureCode: string }) => [feature.featureCode, feature.id]).sort(),
      [
        ["A", featureByCode(seeded.body, "A").id],
        ["B", featureB.id],
      ],
    );
  });
}

// --- 9-10. monitored assets in import and validation -----------------------------------------------------

for (const mode of MODES) {
  test(`${mode}: an import repeating a metricName within one product answers 400 naming the repeat`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const refused = await importProducts(baseUrl, [
      { productCode: "IMP-METRIC-DUP", monitoredAssets: [{ metricName: "cpu" }, { metricName: "cpu" }] },
    ]);
    t.is(refused.status, 400);
    t.deepEqual(problemFields(refused.body), ["products[0].monitoredAssets[1].metricName"]);
    t.deepEqual(await listedCodes(baseUrl, "productCode=IMP-METRIC-DUP"), []);
  });

  test(`${mode}: an import of an existing product matches its asset by trimmed metricName`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "IMP-METRIC-TRIM" });
    const asset = await rest(baseUrl, "POST", `${PRODUCTS}/${product.id}/monitored-resources`, {
      metricName: "cpu",
      name: "CPU",
    });
    t.is(asset.status, 200);

    const imported = await importProducts(baseUrl, [
      { productCode: "IMP-METRIC-TRIM", monitoredAssets: [{ metricName: " cpu", name: "Processor" }] },
    ]);
    t.is(imported.status, 200, JSON.stringify(imported.body));
    t.like(imported.body, { createdCount: 0, updatedCount: 1 });
    const after = await getProduct(baseUrl, product.id);
    t.is(after.monitoredAssets.length, 1);
    t.like(after.monitoredAssets[0], { id: asset.body.id, metricName: "cpu", name: "Processor" });
  });

  test(`${mode}: a monitored asset with a malformed meteredUsageId or balanceUsageId answers 400 naming it`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "ASSET-BAD-IDS" });
    const assetsPath = `${PRODUCTS}/${product.id}/monitored-resources`;
    const metered = await rest(baseUrl, "POST", assetsPath, {
      metricName: "metered",
      metricType: 1,
      meteredUsageId: "not-a-uuid",
      meteredUsage: { consumptionPeriod: "P1M" },
    });
    t.is(metered.status, 400);
    t.deepEqual(problemFields(metered.body), ["meteredUsageId"]);

    const balance = await rest(baseUrl, "POST", assetsPath, {
      metricName: "balance",
      metricType: 2,
      balanceUsageId: "not-a-uuid",
      balanceUsage: { totalCredits: 10 },
    });
    t.is(balance.status, 400);
    t.deepEqual(problemFields(balance.body), ["balanceUsageId"]);
    t.deepEqual((await getProduct(baseUrl, product.id)).monitoredAssets, []);
  });

  test(`${mode}: an invalid consumptionPeriod answers 400 naming it, on create, change and import`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const product = await createProduct(baseUrl, { productCode: "ASSET-BAD-PERIOD" });
    const assetsPath = `${PRODUCTS}/${product.id}/monitored-resources`;
    const withPeriod = (consumptionPeriod: string) => ({
      ...meteredAsset,
      meteredUsage: { ...meteredAsset.meteredUsage, consumptionPeriod },
    });

    const created = await rest(baseUrl, "POST", assetsPath, withPeriod("monthly"));
    t.is(created.status, 400);
    t.deepEqual(problemFields(created.body), ["meteredUsage.consumptionPeriod"]);
    t.regex(created.body.errors[0].message, /neither a duration nor a cron expression: .*P1M.*cron/);
    t.deepEqual((await getProduct(baseUrl, product.id)).monitoredAssets, []);

    const added = await rest(baseUrl, "POST", assetsPath, withPeriod("0 0 1 * *"));
    t.is(added.status, 200, JSON.stringify(added.body));
    const changed = await rest(baseUrl, "PUT", assetsPath, withPeriod("P0M"));
    t.is(changed.status, 400);
    t.deepEqual(problemFields(changed.body), ["meteredUsage.consumptionPeriod"]);
    t.regex(changed.body.errors[0].message, /at least 1/);
    const kept = (await getProduct(baseUrl, product.id)).monitoredAssets;
    t.is(kept[0].meteredUsage.consumptionPeriod, "0 0 1 * *");

    const imported = await importProducts(baseUrl, [
      { productCode: "IMP-BAD-PERIOD", monitoredAssets: [withPeriod("61 * * * *")] },
    ]);
    t.is(imported.status, 400);
    t.deepEqual(problemFields(imported.body), ["products[0].monitoredAssets[0].meteredUsage.consumptionPeriod"]);
    t.regex(imported.body.errors[0].message, /not a valid cron expression/);
  });
}

// --- 11. concurrent imports on MySQL ----------------------------------------------------------------------

test("MySQL: concurrent imports of distinct codes all create, and of the same codes create each code once", async (t) => {
  const { baseUrl } = t.context.servers.MySQL;
  const importers = 6;
  const distinct = await Promise.all(
    Array.from({ length: importers }, (_, importer) =>
      importProducts(
        baseUrl,
        Array.from({ length: 8 }, (_, index) => ({ productCode: `CONC-OWN-${importer}-${index}` })),
      ),
    ),
  );
  for (const answer of distinct) {
    t.is(answer.status, 200, JSON.stringify(answer.body));
    t.like(answer.body, { createdCount: 8, updatedCount: 0 });
  }
  t.is((await list(baseUrl, "productCode~CONC-OWN-")).body.totalCount, 48);

  const sameCodes = Array.from({ length: 5 }, (_, index) => ({ productCode: `CONC-SAME-${index}`, name: "shared" }));
  const same = await Promise.all(Array.from({ length: importers }, () => importProducts(baseUrl, sameCodes)));
  for (const answer of same) {
    t.is(answer.status, 200, JSON.stringify(answer.body));
    t.is(answer.body.createdCount + answer.body.updatedCount, 5);
  }
  const created = same.reduce((sum, answer) => sum + (answer.body?.createdCount ?? 0), 0);
  t.is(created, 5, "each code is created once; the other imports replace it");
  t.deepEqual(
    (await listedCodes(baseUrl, "productCode~CONC-SAME-", "productCode")).sort(),
    sameCodes.map((product) => product.productCode),
  );
});
