import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AddFeatureResponseSchema,
  AddMonitoredResourceResponseSchema,
  type CatalogService,
  CreateProductResponseSchema,
  type Feature,
  GetProductResponseSchema,
  ImportProductsResponseSchema,
  ListProductsResponseSchema,
  type MonitoredAsset,
  type Product,
  ProductStatus,
  UpdateFeatureResponseSchema,
  UpdateMonitoredResourceResponseSchema,
  UpdateProductResponseSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import type { Clock } from "../platform/clock.js";
import { isUniqueViolation } from "../platform/database.js";
import { conflict, DomainError, invalidField, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { isUuid, requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { type CatalogRepository, type CatalogTransaction, uniqueRuleOf } from "./catalog-repository.js";
import {
  checkFeature,
  checkMonitoredAsset,
  checkProductFields,
  checkPropertyValuesSize,
  checkStatus,
} from "./catalog-validation.js";
import type { FeatureRow, MonitoredAssetRow, ProductRow } from "./entities.js";
import {
  balanceUsageText,
  durationText,
  meteredUsageText,
  parsePropertyValues,
  productInformationText,
  propertyValuesText,
  storedDate,
  toFeature,
  toMonitoredAsset,
  toProduct,
} from "./product-mapper.js";
import { parseProductFilter, parseProductSort } from "./product-query.js";

export const IMPORT_MAX_PRODUCTS = 500;

export interface CatalogDependencies {
  repository: CatalogRepository;
  clock: Clock;
  newId: () => string;
}

export function createCatalogService(deps: CatalogDependencies): ServiceImpl<typeof CatalogService> {
  const { repository, clock, newId } = deps;

  return {
    async listProducts(request, context) {
      const pageRequest = resolvePage(request.pageNumber, request.pageSize);
      const { rows, total } = await repository.listProducts(providerOf(context), {
        filter: parseProductFilter(request.filter),
        sort: parseProductSort(request.sortOrder),
        offset: pageRequest.offset,
        limit: pageRequest.pageSize,
      });
      const children = await repository.loadChildren(rows.map((row) => row.id));
      return create(ListProductsResponseSchema, {
        ...pageInfo(pageRequest, total, rows.length),
        items: rows.map((row) => toProduct(row, children.features(row.id), children.assets(row.id))),
      });
    },

    async getProduct(request, context) {
      const productId = requireUuid("productId", request.productId);
      const tree = await repository.findProductTree(providerOf(context), productId);
      if (!tree) throw notFound("product", productId);
      return create(GetProductResponseSchema, { product: toProduct(tree.product, tree.features, tree.assets) });
    },

    async createProduct(request, context) {
      const violations = new Violations().required("productCode", request.productCode);
      checkProductFields(violations, "", request);
      violations.throwIfAny();
      const now = clock.now();
      const row: ProductRow = {
        id: newId(),
        providerId: providerOf(context),
        status: ProductStatus.ACTIVE,
        name: request.name,
        description: request.description || null,
        productCode: request.productCode.trim(),
        productVersion: request.productVersion.trim(),
        expirationDate: null,
        externalId: request.externalId,
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
      await translateUniqueViolations(() => repository.insertProduct(row), { productCode: row.productCode });
      return create(CreateProductResponseSchema, { product: toProduct(row, [], []) });
    },

    async updateProduct(request, context) {
      const productId = requireUuid("productId", request.productId);
      const violations = new Violations();
      if (request.productCode !== undefined) violations.required("productCode", request.productCode);
      checkProductFields(violations, "", request);
      for (const [index, feature] of request.features.entries()) {
        checkFeature(violations, `features[${index}].`, feature);
        violations.uuid(`features[${index}].id`, feature.id);
      }
      violations.throwIfAny();
      const providerId = providerOf(context);
      const product = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const row = await lockedProduct(tx, providerId, productId);
            const changed = { ...row };
            if (request.name !== undefined) changed.name = request.name;
            if (request.productCode !== undefined) changed.productCode = request.productCode.trim();
            if (request.description !== undefined) changed.description = request.description || null;
            if (request.productVersion !== undefined) changed.productVersion = request.productVersion.trim();
            if (request.externalId !== undefined) changed.externalId = request.externalId;
            if (request.productMetaData !== undefined) changed.productMetaData = request.productMetaData || null;
            if (request.productLicenseData !== undefined)
              changed.productLicenseData = request.productLicenseData || null;
            if (request.productInformation)
              changed.productInformation = productInformationText(request.productInformation);
            if (request.clearExpirationDate) changed.expirationDate = null;
            else if (request.expirationDate) changed.expirationDate = storedDate(request.expirationDate);
            const properties = { ...parsePropertyValues(row.propertyValues), ...request.propertyValues };
            for (const key of request.removePropertyValueKeys) delete properties[key];
            changed.propertyValues = propertyValuesText(properties);
            const merged = new Violations();
            checkPropertyValuesSize(merged, "propertyValues", changed.propertyValues);
            merged.throwIfAny();

            const { features, assets } = await tx.children(productId);
            const featuresChanged = await upsertFeatures(tx, row.id, { features, assets }, request.features, {
              field: "features",
              unknownId: "reject",
            });
            const rowChanged = differs(changed, row);
            if (rowChanged || featuresChanged) await saveRevision(tx, changed);
            const after = featuresChanged ? await tx.children(productId) : { features, assets };
            return toProduct(rowChanged || featuresChanged ? changed : row, after.features, after.assets);
          }),
        { productCode: request.productCode },
      );
      return create(UpdateProductResponseSchema, { product });
    },

    async importProducts(request, context) {
      if (request.products.length > IMPORT_MAX_PRODUCTS) {
        throw invalidField("products", `must hold at most ${IMPORT_MAX_PRODUCTS} products`);
      }
      validateImport(request.products);
      const providerId = providerOf(context);
      const {
        stored: products,
        created,
        updated,
      } = await importRetryingCreatedCodes(() =>
        repository.transaction(async (tx) => {
          const stored: Product[] = [];
          let created = 0;
          let updated = 0;
          for (const [index, incoming] of request.products.entries()) {
            const existing = await tx.lockProductByCode(providerId, incoming.productCode.trim());
            const row = existing
              ? importedRow(incoming, existing.id, providerId, existing)
              : importedRow(incoming, await importedProductId(tx, incoming, index, providerId), providerId);
            if (existing) {
              await tx.updateProduct(row);
              updated++;
            } else {
              await tx.insertProduct(row);
              created++;
            }
            const { assets } = await tx.children(row.id);
            for (const asset of incoming.monitoredAssets) {
              const match = assets.find(
                (candidate) =>
                  candidate.id === asset.id.toLowerCase() || candidate.metricName === asset.metricName.trim(),
              );
              if (match) await tx.updateAsset(assetRow(asset, row.id, match));
              else
                await tx.insertAsset(
                  assetRow(asset, row.id, undefined, await freeId(asset.id, (id) => tx.assetIdTaken(id))),
                );
            }
            const before = await tx.children(row.id);
            await upsertFeatures(tx, row.id, before, incoming.features, {
              field: `products[${index}].features`,
              unknownId: "create",
            });
            const after = await tx.children(row.id);
            stored.push(toProduct(row, after.features, after.assets));
          }
          return { stored, created, updated };
        }),
      );
      return create(ImportProductsResponseSchema, { createdCount: created, updatedCount: updated, products });
    },

    async addFeature(request, context) {
      const productId = requireUuid("productId", request.productId);
      const violations = new Violations();
      checkFeature(violations, "", request);
      violations.throwIfAny();
      const feature = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerOf(context), productId);
            const { features, assets } = await tx.children(productId);
            requireOwnAsset(assets, request.meteredAssetId);
            const now = clock.now();
            const fields = featureFields(request);
            const deletedWithCode = fields.featureCode
              ? features.find((candidate) => candidate.isDeleted && candidate.featureCode === fields.featureCode)
              : undefined;
            const row: FeatureRow = {
              ...fields,
              id: deletedWithCode?.id ?? newId(),
              productId,
              isEnabled: request.isEnabled ?? true,
              version: "",
              featurePath: "",
              isDeleted: false,
              revisionNumber: deletedWithCode ? deletedWithCode.revisionNumber + 1 : 1,
              createdAt: deletedWithCode?.createdAt ?? now,
              updatedAt: now,
            };
            if (deletedWithCode) await tx.updateFeature(row);
            else await tx.insertFeature(row);
            await saveRevision(tx, product);
            return toFeature(row);
          }),
        { featureCode: request.featureCode },
      );
      return create(AddFeatureResponseSchema, { feature });
    },

    async updateFeature(request, context) {
      const productId = requireUuid("productId", request.productId);
      const featureId = requireUuid("featureId", request.featureId);
      const violations = new Violations();
      checkFeature(violations, "", request);
      violations.throwIfAny();
      const feature = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerOf(context), productId);
            const { features } = await tx.children(productId);
            const current = features.find((candidate) => candidate.id === featureId && !candidate.isDeleted);
            if (!current) throw notFound("feature", featureId);
            const next: FeatureRow = { ...current };
            if (request.moduleName !== undefined) next.moduleName = request.moduleName;
            if (request.name !== undefined) next.name = request.name;
            if (request.description !== undefined) next.description = request.description || null;
            if (request.value !== undefined) next.value = request.value || null;
            if (request.version !== undefined) next.version = request.version;
            if (request.featurePath !== undefined) next.featurePath = request.featurePath;
            if (request.featureCode !== undefined) next.featureCode = request.featureCode.trim() || null;
            if (request.isEnabled !== undefined) next.isEnabled = request.isEnabled;
            if (request.isAvailableDuringTrialPeriod !== undefined) {
              next.isAvailableDuringTrialPeriod = request.isAvailableDuringTrialPeriod;
            }
            if (request.isAvailableDuringGracePeriod !== undefined) {
              next.isAvailableDuringGracePeriod = request.isAvailableDuringGracePeriod;
            }
            if (request.canModifyValueOnEntitlement !== undefined) {
              next.canModifyValueOnEntitlement = request.canModifyValueOnEntitlement;
            }
            if (!differs(next, current)) return toFeature(current);
            next.revisionNumber = current.revisionNumber + 1;
            next.updatedAt = clock.now();
            await tx.updateFeature(next);
            await saveRevision(tx, product);
            return toFeature(next);
          }),
        { featureCode: request.featureCode },
      );
      return create(UpdateFeatureResponseSchema, { feature });
    },

    async addMonitoredResource(request, context) {
      const productId = requireUuid("productId", request.productId);
      const asset = requireAsset(request.monitoredAsset);
      const stored = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerOf(context), productId);
            const row = assetRow(asset, productId);
            await tx.insertAsset(row);
            await saveRevision(tx, product);
            return toMonitoredAsset(row);
          }),
        { metricName: asset.metricName },
      );
      return create(AddMonitoredResourceResponseSchema, { monitoredAsset: stored });
    },

    async updateMonitoredResource(request, context) {
      const productId = requireUuid("productId", request.productId);
      const asset = requireAsset(request.monitoredAsset);
      const stored = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerOf(context), productId);
            const { assets } = await tx.children(productId);
            const current = asset.id
              ? assets.find((candidate) => candidate.id === asset.id.toLowerCase())
              : assets.find((candidate) => candidate.metricName === asset.metricName.trim());
            if (!current) throw notFound("monitored asset", asset.id || asset.metricName);
            const row = assetRow(asset, productId, current);
            if (!differs({ ...row, updatedAt: current.updatedAt }, current)) return toMonitoredAsset(current);
            await tx.updateAsset(row);
            await saveRevision(tx, product);
            return toMonitoredAsset(row);
          }),
        { metricName: asset.metricName },
      );
      return create(UpdateMonitoredResourceResponseSchema, { monitoredAsset: stored });
    },
  };

  async function lockedProduct(tx: CatalogTransaction, providerId: string, productId: string): Promise<ProductRow> {
    const row = await tx.lockProduct(providerId, productId);
    if (!row) throw notFound("product", productId);
    if (row.isLocked)
      throw new DomainError("failed-precondition", `product ${productId} is locked`, { slug: "product-locked" });
    return row;
  }

  async function unlockedProduct(tx: CatalogTransaction, providerId: string, productId: string): Promise<ProductRow> {
    const row = await lockedProduct(tx, providerId, productId);
    if (row.isDeleted) throw notFound("product", productId);
    return row;
  }

  async function saveRevision(tx: CatalogTransaction, row: ProductRow): Promise<void> {
    row.revisionNumber += 1;
    row.updatedAt = clock.now();
    await tx.updateProduct(row);
  }

  /**
   * Applies feature elements by id, else by featureCode, else as new features; answers whether anything
   * changed. An id that is not a feature of the product is refused on update and kept for a new feature on
   * import.
   */
  async function upsertFeatures(
    tx: CatalogTransaction,
    productId: string,
    { features: existing, assets }: { features: FeatureRow[]; assets: MonitoredAssetRow[] },
    incoming: Feature[],
    { field, unknownId }: { field: string; unknownId: "reject" | "create" },
  ): Promise<boolean> {
    let changed = false;
    for (const [index, feature] of incoming.entries()) {
      requireOwnAsset(assets, feature.meteredAssetId, `${field}[${index}].meteredAssetId`);
      const code = feature.featureCode.trim() || null;
      const byId = feature.id ? existing.find((candidate) => candidate.id === feature.id.toLowerCase()) : undefined;
      if (feature.id && !byId && unknownId === "reject") {
        throw invalidField(`${field}[${index}].id`, "is not a feature of this product");
      }
      const current = byId ?? (code ? existing.find((candidate) => candidate.featureCode === code) : undefined);
      if (code && existing.some((candidate) => candidate.featureCode === code && candidate !== current)) {
        throw conflict(
          `${field}[${index}].featureCode ${JSON.stringify(code)} is the code of another feature of this product`,
          "feature-code-taken",
        );
      }
      const now = clock.now();
      const fields = { ...featureFields(feature), featurePath: feature.featurePath, version: feature.version };
      if (current) {
        const next: FeatureRow = feature.isDeleted
          ? { ...current, isDeleted: true }
          : { ...current, ...fields, isEnabled: feature.isEnabled ?? current.isEnabled, isDeleted: false };
        if (!differs(next, current)) continue;
        next.revisionNumber = current.revisionNumber + 1;
        next.updatedAt = now;
        await tx.updateFeature(next);
      } else {
        const row: FeatureRow = {
          ...fields,
          id: await freeId(feature.id, (id) => tx.featureIdTaken(id)),
          productId,
          isEnabled: feature.isEnabled ?? true,
          isDeleted: feature.isDeleted,
          revisionNumber: 1,
          createdAt: now,
          updatedAt: now,
        };
        await tx.insertFeature(row);
        existing.push(row);
      }
      changed = true;
    }
    return changed;
  }

  /** The stored form of `asset`: replacing `current` when given, else new with `newAssetId`. */
  function assetRow(
    asset: MonitoredAsset,
    productId: string,
    current?: MonitoredAssetRow,
    newAssetId = newId(),
  ): MonitoredAssetRow {
    const now = clock.now();
    const previousMetered = current?.meteredUsage ? toMonitoredAsset(current).meteredUsage : undefined;
    const previousBalance = current?.balanceUsage ? toMonitoredAsset(current).balanceUsage : undefined;
    const meteredUsage = asset.meteredUsage
      ? { ...asset.meteredUsage, id: asset.meteredUsage.id || asset.meteredUsageId || previousMetered?.id || newId() }
      : undefined;
    const balanceUsage = asset.balanceUsage
      ? { ...asset.balanceUsage, id: asset.balanceUsage.id || asset.balanceUsageId || previousBalance?.id || newId() }
      : undefined;
    return {
      id: current?.id ?? newAssetId,
      productId,
      entitlementId: asset.entitlementId || null,
      metricName: asset.metricName.trim(),
      name: asset.name,
      description: asset.description || null,
      unit: asset.unit,
      category: asset.category,
      numberFormat: asset.numberFormat,
      metricType: asset.metricType,
      allowedBackDatingTolerance: durationText(asset.allowedBackDatingTolerance),
      meteredUsage: meteredUsageText(meteredUsage),
      balanceUsage: balanceUsageText(balanceUsage),
      createdAt: current?.createdAt ?? now,
      updatedAt: now,
    };
  }

  function importedRow(product: Product, id: string, providerId: string, existing?: ProductRow): ProductRow {
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
  async function importedProductId(
    tx: CatalogTransaction,
    product: Product,
    index: number,
    providerId: string,
  ): Promise<string> {
    if (!product.id) return newId();
    const id = product.id.toLowerCase();
    const owner = await tx.productOwner(id);
    if (owner === providerId) {
      throw conflict(`products[${index}].id ${id} is the id of another of your products`, "product-id-taken");
    }
    return owner ? newId() : id;
  }

  /** `wanted` when it is a UUID no row holds yet, else a new id. */
  async function freeId(wanted: string, taken: (id: string) => Promise<boolean>): Promise<string> {
    const id = wanted.toLowerCase();
    return isUuid(id) && !(await taken(id)) ? id : newId();
  }
}

function featureFields(feature: Omit<Partial<Feature>, "$typeName">) {
  return {
    featureCode: feature.featureCode?.trim() || null,
    moduleName: feature.moduleName ?? "",
    name: feature.name ?? "",
    description: feature.description || null,
    value: feature.value || null,
    usageMetric: feature.usageMetric ?? "",
    units: feature.units ?? "",
    type: feature.type ?? "",
    isAvailableDuringTrialPeriod: feature.isAvailableDuringTrialPeriod ?? false,
    isAvailableDuringGracePeriod: feature.isAvailableDuringGracePeriod ?? false,
    canModifyValueOnEntitlement: feature.canModifyValueOnEntitlement ?? false,
    canModifyEnabledOnEntitlement: feature.canModifyEnabledOnEntitlement ?? false,
    meteredAssetId: feature.meteredAssetId ? feature.meteredAssetId.toLowerCase() : null,
  };
}

function requireAsset(asset: MonitoredAsset | undefined): MonitoredAsset {
  if (!asset) throw invalidField("monitoredAsset", "is required");
  const violations = new Violations();
  checkMonitoredAsset(violations, "", asset);
  violations.throwIfAny();
  return asset;
}

function requireOwnAsset(assets: MonitoredAssetRow[], assetId: string, field = "meteredAssetId"): void {
  if (assetId && !assets.some((asset) => asset.id === assetId.toLowerCase())) {
    throw invalidField(field, "is not a monitored asset of this product");
  }
}

function validateImport(products: Product[]): void {
  const violations = new Violations();
  const codes = new Map<string, number>();
  for (const [index, product] of products.entries()) {
    const prefix = `products[${index}].`;
    violations.required(`${prefix}productCode`, product.productCode).uuid(`${prefix}id`, product.id);
    checkProductFields(violations, prefix, product);
    checkStatus(violations, `${prefix}status`, product.status);
    const code = product.productCode.trim();
    const first = codes.get(code);
    if (code && first !== undefined) violations.add(`${prefix}productCode`, `repeats products[${first}].productCode`);
    else codes.set(code, index);
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

/** Whether any column of `next` differs from `current` (dates compared by instant). */
function differs<T extends object>(next: T, current: T): boolean {
  return Object.keys(next).some((key) => {
    const [a, b] = [next[key as keyof T], current[key as keyof T]];
    return a instanceof Date && b instanceof Date ? a.getTime() !== b.getTime() : a !== b;
  });
}

const IMPORT_ATTEMPTS = 3;

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

/** Turns a broken unique rule into the 409 the caller can act on. */
async function translateUniqueViolations<T>(
  work: () => Promise<T>,
  subject: { productCode?: string; featureCode?: string; metricName?: string } = {},
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    switch (uniqueRuleOf(error)) {
      case "product-code":
        throw conflict(
          subject.productCode !== undefined
            ? `a product with productCode ${JSON.stringify(subject.productCode.trim())} already exists`
            : "a product with that productCode already exists",
          "product-code-taken",
        );
      case "feature-code":
        throw conflict(
          `a feature with ${subject.featureCode ? `featureCode ${JSON.stringify(subject.featureCode.trim())}` : "that featureCode"} already exists on this product`,
          "feature-code-taken",
        );
      case "asset-metric":
        throw conflict(
          `a monitored asset with ${subject.metricName ? `metricName ${JSON.stringify(subject.metricName.trim())}` : "that metricName"} already exists on this product`,
          "metric-name-taken",
        );
      default:
        throw conflict("the resource already exists", "already-exists");
    }
  }
}
