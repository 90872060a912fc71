import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test from "ava";
import { openDatabase } from "../../src/app.js";
import { CatalogRepository } from "../../src/catalog/catalog-repository.js";
import type { ProductRow } from "../../src/catalog/entities.js";
import { loadConfig } from "../../src/platform/config.js";
import { migrate } from "../../src/platform/database.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";

function product(code: string): ProductRow {
  const now = new Date();
  return {
    id: `00000000-0000-4000-8000-${code.padStart(12, "0")}`,
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
    createdAt: now,
    updatedAt: now,
  };
}

test("on SQLite, a failing transaction never rolls back one that overlapped it and committed", async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-sqlite-tx-"));
  const dataSource = openDatabase(loadConfig({ DATABASE_URL: `sqlite:${path.join(directory, "p.sqlite")}` }));
  await dataSource.initialize();
  t.teardown(() => dataSource.destroy());
  await migrate(dataSource);
  const repository = new CatalogRepository(dataSource);

  let releaseFailing: () => void = () => {};
  const failingHolds = new Promise<void>((resolve) => {
    releaseFailing = resolve;
  });
  const failing = repository.transaction(async (tx) => {
    await tx.insertProduct(product("111"));
    await failingHolds;
    throw new Error("this transaction fails");
  });
  const committing = repository.transaction(async (tx) => {
    await tx.insertProduct(product("222"));
  });
  const standalone = repository.insertProduct(product("333"));
  setTimeout(releaseFailing, 50);

  const [failed, committed, inserted] = await Promise.allSettled([failing, committing, standalone]);
  t.is(failed.status, "rejected");
  t.is(committed.status, "fulfilled");
  t.is(inserted.status, "fulfilled");
  const codes = (await dataSource.query("SELECT product_code FROM products ORDER BY product_code")) as {
    product_code: string;
  }[];
  t.deepEqual(
    codes.map((row) => row.product_code),
    ["222", "333"],
  );
});
