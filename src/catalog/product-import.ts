import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type ImportProductsRequest,
  type ImportProductsResponse,
  ImportProductsResponseSchema,
  type Product,
} from "../../gen/provision/v1/catalog_pb.js";
import type { Clock } from "../platform/clock.js";
import { conflict, DomainError } from "../platform/errors.js";
import { isUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { assetRow } from "./asset-rows.js";
import type { CatalogDependencies, IdsAndClock } from "./catalog-dependencies.js";
import { type CatalogTransaction, type CatalogWrites, noWrites } from "./catalog-repository.js";
import {
  checkFeature,
  checkImportSize,
  checkMonitoredAsset,
  checkProductFields,
  checkPropertyValuesSize,
  checkStatus,
  MAX_ASSETS_PER_PRODUCT,
} from "./catalog-validation.js";
import { requireRoom, translateUniqueViolations, wantedIds } from "./catalog-writes.js";
import type { MonitoredAssetRow, ProductRow } from "./entities.js";
import { planFeatures } from "./feature-plans.js";
import { productInformationText, propertyValuesText, storedDate, toProduct } from "./product-mapper.js";

/** Creates, or replaces by productCode, every product of the request, in one transaction. */
export async function importProducts(
  deps: CatalogDependencies,
  request: ImportProductsRequest,
  context: HandlerContext,
): Promise<ImportProductsResponse> {
  const { repository, products } = deps;
  validateImport(request.products);
  const providerId = providerOf(context);
  const { stored, created, replacedIds } = await importRetryingCreatedCodes(() =>
    repository.transaction((tx) => importAll(deps, tx, providerId, request.products)),
  );
  await products.changed(providerId, replacedIds);
  return create(ImportProductsResponseSchema, {
    createdCount: created,
    updatedCount: replacedIds.length,
    products: stored,
  });
}

/** Every product checked as create checks one, and no productCode, id or metricName given twice. */
function validateImport(products: Product[]): void {
  const violations = new Violations();
  checkImportSize(violations, products);
  violations.throwIfAny();
  const codes = new Map<string, number>();
  const ids = new Map<string, number>();
  for (const [index, product] of products.entries()) {
    const prefix = `products[${index}].`;
    violations.required(`${prefix}productCode`, product.productCode).uuid(`${prefix}id`, product.id);
    checkProductFields(violations, prefix, product);
    checkStatus(violations, `${prefix}status`, product.status);
    const code = product.productCode.trim();
    const first = codes.get(code);
    if (code && first !== undefined) violations.add(`${prefix}productCode`, `repeats products[${first}].productCode`);
    else codes.set(code, index);
    const id = product.id.toLowerCase();
    const firstWithId = ids.get(id);
    if (id && firstWithId !== undefined) violations.add(`${prefix}id`, `repeats products[${firstWithId}].id`);
    else ids.set(id, index);
    for (const [featureIndex, feature] of product.features.entries()) {
      checkFeature(violations, `${prefix}features[${featureIndex}].`, feature);
      violations.uuid(`${prefix}features[${featureIndex}].id`, feature.id);
    }
    const metricNames = new Map<string, number>();
    for (const [assetIndex, asset] of product.monitoredAssets.entries()) {
      const field = `${prefix}monitoredAssets[${assetIndex}]`;
      checkMonitoredAsset(violations, `${field}.`, asset);
      const metricName = asset.metricName.trim();
      const firstAsset = metricNames.get(metricName);
      if (firstAsset !== undefined) {
        violations.add(`${field}.metricName`, `repeats ${prefix}monitoredAssets[${firstAsset}].metricName`);
      } else metricNames.set(metricName, assetIndex);
    }
    checkPropertyValuesSize(violations, `${prefix}propertyValues`, propertyValuesText(product.propertyValues));
  }
  violations.throwIfAny();
}

const IMPORT_ATTEMPTS = 3;

/** Imported products planned between pauses, so planning a large import does not hold the event loop. */
const PRODUCTS_PER_PAUSE = 50;

/**
 * Runs an import again when a concurrent writer created one of its product codes after the import looked it
 * up: the next run finds the product and replaces it, as an import of an existing code does.
 */
async function importRetryingCreatedCodes<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await translateUniqueViolations(work);
    } catch (error) {
      const codeTaken = error instanceof DomainError && error.slug === "product-code-taken";
      if (!codeTaken || attempt >= IMPORT_ATTEMPTS) throw error;
    }
  }
}

/**
 * Imports every product in one transaction: one query per kind of lookup for the whole import, then the
 * writes in chunks (pausing between them on SQLite).
 */
async function importAll(deps: IdsAndClock, tx: CatalogTransaction, providerId: string, products: Product[]) {
  const existing = new Map(
    (
      await tx.lockProductsByCode(
        providerId,
        products.map((product) => product.productCode.trim()),
      )
    ).map((row) => [row.productCode, row]),
  );
  const owners = await tx.productOwners(products.filter((product) => product.id).map((p) => p.id.toLowerCase()));
  const children = await tx.childrenOf([...existing.values()].map((row) => row.id));
  const takenFeatures = await tx.takenFeatureIds(wantedIds(products.flatMap((product) => product.features)));
  const takenAssets = await tx.takenAssetIds(wantedIds(products.flatMap((product) => product.monitoredAssets)));
  const writes = noWrites();
  const stored: Product[] = [];
  const claimedProductIds = new Set<string>();
  for (const [index, incoming] of products.entries()) {
    if (index % PRODUCTS_PER_PAUSE === PRODUCTS_PER_PAUSE - 1) await tx.pause();
    const current = existing.get(incoming.productCode.trim());
    if (current) refuseOtherProductsId(incoming, index, current, providerId, owners);
    const id = current?.id ?? importedProductId(deps.newId, incoming, index, providerId, owners, claimedProductIds);
    const row = importedRow(deps.clock, incoming, id, providerId, current);
    (current ? writes.updateProducts : writes.insertProducts).push(row);
    const assets = planAssets(
      deps,
      row.id,
      current ? children.assets(row.id) : [],
      incoming,
      index,
      writes,
      takenAssets,
    );
    const features = planFeatures(
      deps,
      row.id,
      current ? children.features(row.id) : [],
      assets,
      incoming.features,
      writes,
      {
        field: `products[${index}].features`,
        unknownId: "create",
        taken: takenFeatures,
      },
    );
    stored.push(toProduct(row, features, assets));
  }
  await tx.apply(writes);
  return {
    stored,
    created: writes.insertProducts.length,
    replacedIds: writes.updateProducts.map((row) => row.id),
  };
}

/** Plans an imported product's assets, matched by id or else by metricName; answers the assets afterwards. */
function planAssets(
  deps: IdsAndClock,
  productId: string,
  existing: MonitoredAssetRow[],
  product: Product,
  index: number,
  writes: CatalogWrites,
  taken: Set<string>,
): MonitoredAssetRow[] {
  const assets = [...existing];
  for (const asset of product.monitoredAssets) {
    const position = assets.findIndex(
      (candidate) => candidate.id === asset.id.toLowerCase() || candidate.metricName === asset.metricName.trim(),
    );
    if (position >= 0) {
      const row = assetRow(deps, asset, productId, assets[position]);
      writes.updateAssets.push(row);
      assets[position] = row;
      continue;
    }
    const wanted = asset.id.toLowerCase();
    const id = isUuid(wanted) && !taken.has(wanted) ? wanted : deps.newId();
    taken.add(id);
    const row = assetRow(deps, asset, productId, undefined, id);
    writes.insertAssets.push(row);
    assets.push(row);
  }
  requireRoom(`products[${index}].monitoredAssets`, assets.length, MAX_ASSETS_PER_PRODUCT, "monitored assets");
  return assets;
}

function importedRow(
  clock: Clock,
  product: Product,
  id: string,
  providerId: string,
  existing?: ProductRow,
): ProductRow {
  const now = clock.now();
  return {
    id,
    providerId,
    status: product.status,
    name: product.name,
    description: product.description || null,
    productCode: product.productCode.trim(),
    productVersion: product.productVersion.trim(),
    expirationDate: product.expirationDate ? storedDate(product.expirationDate) : null,
    externalId: product.externalId,
    productInformation: productInformationText(product.productInformation),
    propertyValues: propertyValuesText(product.propertyValues),
    isDeleted: product.isDeleted,
    isLocked: product.isLocked,
    productMetaData: product.productMetaData || null,
    productLicenseData: product.productLicenseData || null,
    revisionNumber: existing ? existing.revisionNumber + 1 : 1,
    createdAt: existing?.createdAt ?? now,
    updatedAt: now,
  };
}

/**
 * The id of a product an import creates: the imported one when it is free. An id of another provider's
 * product is replaced silently, so an import learns nothing about other tenants.
 */
function importedProductId(
  newId: () => string,
  product: Product,
  index: number,
  providerId: string,
  owners: Map<string, string>,
  claimed: Set<string>,
): string {
  if (!product.id) return newId();
  const id = product.id.toLowerCase();
  if (owners.get(id) === providerId || claimed.has(id)) {
    throw conflict(`products[${index}].id ${id} is the id of another of your products`, "product-id-taken");
  }
  claimed.add(id);
  return owners.has(id) ? newId() : id;
}

/**
 * A product replaced by its productCode keeps its id; an imported id naming another of the provider's products
 * would replace this one in that one's name, so it is refused. Any other id (free, or another provider's) is
 * ignored, as the code decides.
 */
function refuseOtherProductsId(
  incoming: Product,
  index: number,
  current: ProductRow,
  providerId: string,
  owners: Map<string, string>,
): void {
  const id = incoming.id.toLowerCase();
  if (id && id !== current.id && owners.get(id) === providerId) {
    throw conflict(
      `products[${index}].id ${id} is the id of another of your products than the one with productCode ${current.productCode}`,
      "product-id-taken",
    );
  }
}
