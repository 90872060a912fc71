import { randomUUID } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import type { DataSource } from "typeorm";
import { uniqueRuleOf } from "../../src/catalog/catalog-repository.js";
import {
  catalogEntities,
  FeatureEntity,
  type FeatureRow,
  MonitoredAssetEntity,
  type MonitoredAssetRow,
  ProductEntity,
  type ProductRow,
} from "../../src/catalog/entities.js";
import { SqlTable } from "../../src/catalog/sql-table.js";
import type { DatabaseConfig } from "../../src/platform/config.js";
import { createDataSource, isUniqueViolation, migrate } from "../../src/platform/database.js";
import { EntitlementAssets1764000000000 } from "../../src/platform/migrations/0004-entitlement-assets.js";
import { migrations } from "../../src/platform/migrations/index.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { type DatabaseMode, freshDatabase } from "../support/migration-databases.js";
import { PRODUCTS, rest } from "../support/rest.js";
import type { TestServer } from "../support/test-server.js";

type Mode = DatabaseMode;
const UP_TO_0004 = migrations.slice(0, migrations.indexOf(EntitlementAssets1764000000000) + 1);
const BEFORE_0004 = UP_TO_0004.slice(0, -1);
const NOW = new Date("2026-05-01T00:00:00.000Z");

interface MonitoredAssetJson {
  id: string;
  metricName: string;
  entitlementId: string;
}

async function open(t: ExecutionContext, config: DatabaseConfig, upTo: typeof migrations) {
  const dataSource = await createDataSource(config, catalogEntities, upTo).initialize();
  t.teardown(() => (dataSource.isInitialized ? dataSource.destroy() : undefined));
  const applied = await migrate(dataSource);
  const tables = {
    products: new SqlTable(dataSource, ProductEntity),
    features: new SqlTable(dataSource, FeatureEntity),
    assets: new SqlTable(dataSource, MonitoredAssetEntity),
  };
  return { dataSource, applied, tables };
}

const productRow = (code: string): ProductRow => ({
  id: randomUUID(),
  providerId: DEFAULT_PROVIDER_ID,
  status: 2,
  name: code,
  description: null,
  productCode: code,
  productVersion: "",
  expirationDate: null,
  externalId: "",
  productInformation: null,
  propertyValues: null,
  isDeleted: false,
  isLocked: false,
  productMetaData: null,
  productLicenseData: null,
  revisionNumber: 1,
  createdAt: NOW,
  updatedAt: NOW,
});

const assetRow = (productId: string, metricName: string, entitlementId: string | null = null): MonitoredAssetRow => ({
  id: randomUUID(),
  productId,
  entitlementId,
  metricName,
  name: `${metricName} ✓`,
  description: "used",
  unit: "calls",
  category: "usage",
  numberFormat: "0",
  metricType: 1,
  allowedBackDatingTolerance: "3600s",
  meteredUsage: JSON.stringify({ id: randomUUID(), usageTiers: [{ name: "base", endUsage: 1000 }] }),
  balanceUsage: null,
  createdAt: new Date(NOW.getTime() + metricName.length),
  updatedAt: NOW,
});

const featureRow = (productId: string, meteredAssetId: string): FeatureRow => ({
  id: randomUUID(),
  productId,
  featureCode: "api",
  featurePath: "",
  moduleName: "",
  name: "API",
  description: null,
  value: "10",
  version: "",
  usageMetric: "",
  units: "",
  type: "",
  isEnabled: true,
  isAvailableDuringTrialPeriod: false,
  isAvailableDuringGracePeriod: false,
  canModifyValueOnEntitlement: false,
  canModifyEnabledOnEntitlement: false,
  meteredAssetId,
  isDeleted: false,
  revisionNumber: 1,
  createdAt: NOW,
  updatedAt: NOW,
});

/** Every catalog row, in a fixed order. */
async function catalogRows(dataSource: DataSource, tables: Awaited<ReturnType<typeof open>>["tables"]) {
  const manager = dataSource.manager;
  return {
    products: await tables.products.select(manager, "1 = 1 ORDER BY id", []),
    features: await tables.features.select(manager, "1 = 1 ORDER BY id", []),
    assets: await tables.assets.select(manager, "1 = 1 ORDER BY id", []),
  };
}

/** Asserts inserting `row` breaks the asset metric rule. */
async function assertRefused(t: ExecutionContext, insert: () => Promise<void>, what: string) {
  const error = await t.throwsAsync(insert, undefined, what);
  t.true(isUniqueViolation(error), `${what}: ${error?.message}`);
  if (isUniqueViolation(error)) t.is(uniqueRuleOf(error), "asset-metric", what);
}

for (const mode of ["MySQL", "SQLite"] as Mode[]) {
  test(`${mode}: 0004 keeps existing products and assets and lets each entitlement copy them once`, async (t) => {
    const { config, serve } = await freshDatabase(t, mode);
    const old = await open(t, config, BEFORE_0004);
    const gold = productRow("GOLD");
    const silver = productRow("SILVER");
    const calls = assetRow(gold.id, "api-calls");
    const assets = [calls, assetRow(gold.id, "storage"), assetRow(silver.id, "api-calls")];
    await old.tables.products.insert(old.dataSource.manager, [gold, silver]);
    await old.tables.assets.insert(old.dataSource.manager, assets);
    await old.tables.features.insert(old.dataSource.manager, [featureRow(gold.id, calls.id)]);
    const before = await catalogRows(old.dataSource, old.tables);
    t.is(before.assets.length, 3);
    await old.dataSource.destroy();

    const migrated = await open(t, config, UP_TO_0004);
    t.deepEqual(migrated.applied, ["EntitlementAssets1764000000000"]);
    t.deepEqual(await catalogRows(migrated.dataSource, migrated.tables), before, "every row kept as it was");

    const { manager } = migrated.dataSource;
    const insert = (row: MonitoredAssetRow) => () => migrated.tables.assets.insert(manager, [row]);
    const [first, second] = [randomUUID(), randomUUID()];
    await insert(assetRow(gold.id, "api-calls", first))();
    await insert(assetRow(gold.id, "storage", first))();
    await insert(assetRow(gold.id, "api-calls", second))();
    await assertRefused(t, insert(assetRow(gold.id, "api-calls")), "a second product-level api-calls");
    await assertRefused(t, insert(assetRow(gold.id, "api-calls", first)), "a second copy in one entitlement");
    await insert(assetRow(gold.id, "new-metric"))();
    t.is((await catalogRows(migrated.dataSource, migrated.tables)).assets.length, 7);
    await migrated.dataSource.destroy();

    const server: TestServer = await serve();
    t.teardown(() => server.close());
    const metrics = (product: { monitoredAssets: MonitoredAssetJson[] }) =>
      product.monitoredAssets.map((asset) => `${asset.metricName}${asset.entitlementId}`).sort();
    const read = await rest(server.baseUrl, "GET", `${PRODUCTS}/${gold.id}`);
    t.is(read.status, 200);
    t.deepEqual(metrics(read.body), ["api-calls", "new-metric", "storage"], "the product's own assets only");
    const entitlement = await rest(server.baseUrl, "POST", "/api/v1/provision/admin/entitlements", {
      productIds: [gold.id],
    });
    t.is(entitlement.status, 200, JSON.stringify(entitlement.body));
    const copies = entitlement.body.products[0].monitoredAssets as MonitoredAssetJson[];
    t.deepEqual(
      copies.map((copy) => [copy.metricName, copy.entitlementId]),
      ["api-calls", "new-metric", "storage"].map((metric) => [metric, entitlement.body.id]),
    );
    const callsCopy = copies.find((copy) => copy.metricName === "api-calls");
    t.not(callsCopy?.id, calls.id);
    t.is(entitlement.body.features[0].meteredAssetId, callsCopy?.id, "metered by the entitlement's copy");

    const assetsPath = `${PRODUCTS}/${gold.id}/monitored-resources`;
    const taken = await rest(server.baseUrl, "POST", assetsPath, { metricName: "storage" });
    t.is(taken.status, 409, "a product's metric name is still its own");
    t.is(taken.body.type, "urn:provision:problem:metric-name-taken");
    t.is((await rest(server.baseUrl, "POST", assetsPath, { metricName: "backups" })).status, 200);
  });

  test(`${mode}: undoing 0004 is refused while copies exist, and restores the old rule once they are gone`, async (t) => {
    const { config } = await freshDatabase(t, mode);
    const { dataSource, tables } = await open(t, config, UP_TO_0004);
    const product = productRow("GOLD");
    await tables.products.insert(dataSource.manager, [product]);
    await tables.assets.insert(dataSource.manager, [assetRow(product.id, "api-calls")]);
    await tables.assets.insert(dataSource.manager, [assetRow(product.id, "api-calls", randomUUID())]);
    const before = await catalogRows(dataSource, tables);
    const undo = async () => {
      const runner = dataSource.createQueryRunner();
      await runner.startTransaction();
      try {
        await new EntitlementAssets1764000000000().down(runner);
        await runner.commitTransaction();
      } catch (error) {
        await runner.rollbackTransaction();
        throw error;
      } finally {
        await runner.release();
      }
    };

    const refused = await t.throwsAsync(undo);
    t.true(isUniqueViolation(refused), refused?.message);
    t.deepEqual(await catalogRows(dataSource, tables), before, "nothing changed");
    await tables.assets.insert(dataSource.manager, [assetRow(product.id, "api-calls", randomUUID())]);

    await dataSource.query("DELETE FROM monitored_assets WHERE entitlement_id IS NOT NULL");
    await undo();
    t.deepEqual(
      (await catalogRows(dataSource, tables)).assets,
      before.assets.filter((row) => !row.entitlementId),
    );
    const insert = () => tables.assets.insert(dataSource.manager, [assetRow(product.id, "api-calls", randomUUID())]);
    await assertRefused(t, insert, "a copy beside its product's asset, under the old rule");
  });
}
