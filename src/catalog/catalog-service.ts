import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AddFeatureResponseSchema,
  AddMonitoredResourceResponseSchema,
  type CatalogService,
  CreateProductResponseSchema,
  type Feature,
  type GetProductResponse,
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
import {
  type CatalogRepository,
  type CatalogTransaction,
  type CatalogWrites,
  noWrites,
  uniqueRuleOf,
} from "./catalog-repository.js";
import {
  checkFeature,
  checkImportSize,
  checkMonitoredAsset,
  checkProductFields,
  checkPropertyValuesSize,
  checkStatus,
  MAX_ASSETS_PER_PRODUCT,
  MAX_FEATURES_PER_PRODUCT,
} from "./catalog-validation.js";
import type { FeatureRow, MonitoredAssetRow, ProductRow } from "./entities.js";
import type { ProductCache } from "./product-cache.js";
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

export interface CatalogDependencies {
  repository: CatalogRepository;
  /** GetProduct's answers; every write that changes a product tells it once committed. */
  products: ProductCache;
  clock: Clock;
  newId: () => string;
}

const productResponses = new WeakMap<Product, GetProductResponse>();

/**
 * GetProduct's answer. For a cached product (deep-frozen, shared) it is one frozen answer for as long as the
 * product is cached, so the protocols can write it once (a frozen message's encoding is kept) and send the same
 * bytes again.
 */
function productResponse(product: Product): GetProductResponse {
  if (!Object.isFrozen(product)) return create(GetProductResponseSchema, { product });
  let response = productResponses.get(product);
  if (!response) {
    response = Object.freeze(create(GetProductResponseSchema, { product }));
    productResponses.set(product, response);
  }
  return response;
}

export function createCatalogService(deps: CatalogDependencies): ServiceImpl<typeof CatalogService> {
  const { repository, products, clock, newId } = deps;

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
      const providerId = providerOf(context);
      const product = await products.get(providerId, productId, async () => {
        const tree = await repository.findProductTree(providerId, productId);
        return tree && toProduct(tree.product, tree.features, tree.assets);
      });
      if (!product) throw notFound("product", productId);
      return productResponse(product);
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
            const writes = noWrites();
            const after = planFeatures(row.id, features, assets, request.features, writes, {
              field: "features",
              unknownId: "reject",
              taken: await tx.takenFeatureIds(wantedIds(request.features)),
            });
            await tx.apply(writes);
            const featuresChanged = writes.insertFeatures.length + writes.updateFeatures.length > 0;
            const rowChanged = differs(changed, row);
            if (rowChanged || featuresChanged) await saveRevision(tx, changed);
            return toProduct(rowChanged || featuresChanged ? changed : row, after, assets);
          }),
        { productCode: request.productCode },
      );
      await products.changed(providerId, [productId]);
      return create(UpdateProductResponseSchema, { product });
    },

    async importProducts(request, context) {
      validateImport(request.products);
      const providerId = providerOf(context);
      const { stored, created, replacedIds } = await importRetryingCreatedCodes(() =>
        repository.transaction((tx) => importAll(tx, providerId, request.products)),
      );
      await products.changed(providerId, replacedIds);
      return create(ImportProductsResponseSchema, {
        createdCount: created,
        updatedCount: replacedIds.length,
        products: stored,
      });
    },

    async addFeature(request, context) {
      const productId = requireUuid("productId", request.productId);
      const violations = new Violations();
      checkFeature(violations, "", request);
      violations.throwIfAny();
      const providerId = providerOf(context);
      const feature = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerId, productId);
            const { features, assets } = await tx.children(productId);
            requireOwnAsset(assets, request.meteredAssetId);
            const revived =
              request.featureCode.trim() !== "" &&
              features.some((candidate) => candidate.isDeleted && candidate.featureCode === request.featureCode.trim());
            if (!revived) requireRoom("features", features.length + 1, MAX_FEATURES_PER_PRODUCT, "features");
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
      await products.changed(providerId, [productId]);
      return create(AddFeatureResponseSchema, { feature });
    },

    async updateFeature(request, context) {
      const productId = requireUuid("productId", request.productId);
      const featureId = requireUuid("featureId", request.featureId);
      const violations = new Violations();
      checkFeature(violations, "", request);
      violations.throwIfAny();
      const providerId = providerOf(context);
      const feature = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerId, productId);
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
      await products.changed(providerId, [productId]);
      return create(UpdateFeatureResponseSchema, { feature });
    },

    async addMonitoredResource(request, context) {
      const productId = requireUuid("productId", request.productId);
      const asset = requireAsset(request.monitoredAsset);
      const providerId = providerOf(context);
      const stored = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerId, productId);
            const { assets } = await tx.children(productId);
            requireRoom("monitoredAsset", assets.length + 1, MAX_ASSETS_PER_PRODUCT, "monitored assets");
            const row = assetRow(asset, productId);
            await tx.insertAsset(row);
            await saveRevision(tx, product);
            return toMonitoredAsset(row);
          }),
        { metricName: asset.metricName },
      );
      await products.changed(providerId, [productId]);
      return create(AddMonitoredResourceResponseSchema, { monitoredAsset: stored });
    },

    async updateMonitoredResource(request, context) {
      const productId = requireUuid("productId", request.productId);
      const asset = requireAsset(request.monitoredAsset);
      const providerId = providerOf(context);
      const stored = await translateUniqueViolations(
        () =>
          repository.transaction(async (tx) => {
            const product = await unlockedProduct(tx, providerId, productId);
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
      await products.changed(providerId, [productId]);
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
   * Plans feature elements by id, else by featureCode, else as new features, into `writes`; answers the
   * product's features afterwards. An id that is not a feature of the product is refused on update and kept
   * for a new feature on import (when no row holds it: `taken`).
   */
  function planFeatures(
    productId: string,
    existing: FeatureRow[],
    assets: MonitoredAssetRow[],
    incoming: Feature[],
    writes: CatalogWrites,
    { field, unknownId, taken }: { field: string; unknownId: "reject" | "create"; taken: Set<string> },
  ): FeatureRow[] {
    const assetIds = new Set(assets.map((asset) => asset.id));
    const byId = new Map(existing.map((row) => [row.id, row]));
    const byCode = new Map(existing.filter((row) => row.featureCode).map((row) => [row.featureCode, row]));
    const now = clock.now();
    const inserts = new Map<string, FeatureRow>();
    const updates = new Map<string, FeatureRow>();
    for (const [index, feature] of incoming.entries()) {
      const prefix = `${field}[${index}]`;
      if (feature.meteredAssetId && !assetIds.has(feature.meteredAssetId.toLowerCase())) {
        throw invalidField(`${prefix}.meteredAssetId`, "is not a monitored asset of this product");
      }
      const code = feature.featureCode.trim() || null;
      const wantedId = feature.id.toLowerCase();
      const matchedById = feature.id ? byId.get(wantedId) : undefined;
      if (feature.id && !matchedById && unknownId === "reject") {
        throw invalidField(`${prefix}.id`, "is not a feature of this product");
      }
      const current = matchedById ?? (code ? byCode.get(code) : undefined);
      const holder = code ? byCode.get(code) : undefined;
      if (holder && holder.id !== current?.id) {
        throw conflict(
          `${prefix}.featureCode ${JSON.stringify(code)} is the code of another feature of this product`,
          "feature-code-taken",
        );
      }
      const fields = { ...featureFields(feature), featurePath: feature.featurePath, version: feature.version };
      let row: FeatureRow;
      if (current) {
        const next: FeatureRow = feature.isDeleted
          ? { ...current, isDeleted: true }
          : { ...current, ...fields, isEnabled: feature.isEnabled ?? current.isEnabled, isDeleted: false };
        if (!differs(next, current)) continue;
        row = { ...next, revisionNumber: current.revisionNumber + 1, updatedAt: now };
        (inserts.has(row.id) ? inserts : updates).set(row.id, row);
        if (current.featureCode && current.featureCode !== row.featureCode) byCode.delete(current.featureCode);
      } else {
        const id = isUuid(wantedId) && !taken.has(wantedId) ? wantedId : newId();
        taken.add(id);
        row = {
          ...fields,
          id,
          productId,
          isEnabled: feature.isEnabled ?? true,
          isDeleted: feature.isDeleted,
          revisionNumber: 1,
          createdAt: now,
          updatedAt: now,
        };
        inserts.set(row.id, row);
      }
      byId.set(row.id, row);
      if (row.featureCode) byCode.set(row.featureCode, row);
    }
    const features = [...byId.values()].sort(byCreation);
    requireRoom(field, features.length, MAX_FEATURES_PER_PRODUCT, "features");
    writes.insertFeatures.push(...inserts.values());
    writes.updateFeatures.push(...updates.values());
    return features;
  }

  /**
   * Imports every product in one transaction: one query per kind of lookup for the whole import, then the
   * writes in chunks (pausing between them on SQLite).
   */
  async function importAll(tx: CatalogTransaction, providerId: string, products: Product[]) {
    const existing = new Map(
      (
        await tx.lockProductsByCode(
          providerId,
          products.map((product) => product.productCode.trim()),
        )
      ).map((row) => [row.productCode, row]),
    );
    const owners = await tx.productOwners(
      products
        .filter((product) => !existing.has(product.productCode.trim()) && product.id)
        .map((p) => p.id.toLowerCase()),
    );
    const children = await tx.childrenOf([...existing.values()].map((row) => row.id));
    const takenFeatures = await tx.takenFeatureIds(wantedIds(products.flatMap((product) => product.features)));
    const takenAssets = await tx.takenAssetIds(wantedIds(products.flatMap((product) => product.monitoredAssets)));
    const writes = noWrites();
    const stored: Product[] = [];
    const claimedProductIds = new Set<string>();
    for (const [index, incoming] of products.entries()) {
      if (index % PRODUCTS_PER_PAUSE === PRODUCTS_PER_PAUSE - 1) await tx.pause();
      const current = existing.get(incoming.productCode.trim());
      const id = current?.id ?? importedProductId(incoming, index, providerId, owners, claimedProductIds);
      const row = importedRow(incoming, id, providerId, current);
      (current ? writes.updateProducts : writes.insertProducts).push(row);
      const assets = planAssets(row.id, current ? children.assets(row.id) : [], incoming, index, writes, takenAssets);
      const features = planFeatures(
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
        const row = assetRow(asset, productId, assets[position]);
        writes.updateAssets.push(row);
        assets[position] = row;
        continue;
      }
      const wanted = asset.id.toLowerCase();
      const id = isUuid(wanted) && !taken.has(wanted) ? wanted : newId();
      taken.add(id);
      const row = assetRow(asset, productId, undefined, id);
      writes.insertAssets.push(row);
      assets.push(row);
    }
    requireRoom(`products[${index}].monitoredAssets`, assets.length, MAX_ASSETS_PER_PRODUCT, "monitored assets");
    return assets;
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
  function importedProductId(
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
  checkImportSize(violations, products);
  violations.throwIfAny();
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

/** Refuses an operation after which a product would hold more than `cap` of something. */
function requireRoom(field: string, count: number, cap: number, what: string): void {
  if (count > cap) {
    throw invalidField(
      field,
      `a product holds at most ${cap} ${what} (soft-deleted ones included); this would make ${count}`,
    );
  }
}

/** The lowercased UUIDs among the ids elements ask for. */
function wantedIds(elements: { id: string }[]): string[] {
  return elements.map((element) => element.id.toLowerCase()).filter(isUuid);
}

/** The order features and assets are read in: by creation, then id. */
function byCreation(a: { createdAt: Date; id: string }, b: { createdAt: Date; id: string }): number {
  return a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Whether any column of `next` differs from `current` (dates compared by instant). */
function differs<T extends object>(next: T, current: T): boolean {
  return Object.keys(next).some((key) => {
    const [a, b] = [next[key as keyof T], current[key as keyof T]];
    return a instanceof Date && b instanceof Date ? a.getTime() !== b.getTime() : a !== b;
  });
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
