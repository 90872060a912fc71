import type { FeatureRow, MonitoredAssetRow, ProductRow } from "../catalog/entities.js";
import type { EntitlementFeatureRow } from "./entities.js";
import type { EntitlementContents } from "./entitlement-repository.js";

interface CopyContext {
  entitlementId: string;
  now: Date;
  newId: () => string;
}

/**
 * What a new entitlement holds of catalog products (in the order asked): their live features, and a copy of
 * each monitored asset owned by the entitlement; a feature metered by an asset is metered by its copy.
 */
export function contentsFromCatalog(
  products: ProductRow[],
  catalog: { features: FeatureRow[]; assets: MonitoredAssetRow[] },
  context: CopyContext,
): EntitlementContents {
  const assetIds = new Map<string, string>();
  const assets = catalog.assets.map((asset) => copiedAsset(asset, assetIds, context));
  const features = catalog.features.map(
    (feature): EntitlementFeatureRow => ({
      id: context.newId(),
      entitlementId: context.entitlementId,
      productId: feature.productId,
      sourceFeatureId: feature.id,
      featureCode: feature.featureCode,
      moduleName: feature.moduleName,
      featurePath: feature.featurePath,
      name: feature.name,
      description: feature.description,
      value: feature.value,
      version: feature.version,
      isEnabled: feature.isEnabled,
      isAvailableDuringTrialPeriod: feature.isAvailableDuringTrialPeriod,
      isAvailableDuringGracePeriod: feature.isAvailableDuringGracePeriod,
      canModifyValueOnEntitlement: feature.canModifyValueOnEntitlement,
      canModifyEnabledOnEntitlement: feature.canModifyEnabledOnEntitlement,
      meteredAssetId: remapped(feature.meteredAssetId, assetIds),
      featureExpiration: null,
      createdAt: context.now,
      updatedAt: context.now,
    }),
  );
  return { productIds: products.map((product) => product.id), features, assets };
}

/** A copy of another entitlement's contents (a template's, or the source of one), with new ids. */
export function copiedContents(source: EntitlementContents, context: CopyContext): EntitlementContents {
  const assetIds = new Map<string, string>();
  const assets = source.assets.map((asset) => copiedAsset(asset, assetIds, context));
  const features = source.features.map(
    (feature): EntitlementFeatureRow => ({
      ...feature,
      id: context.newId(),
      entitlementId: context.entitlementId,
      meteredAssetId: remapped(feature.meteredAssetId, assetIds),
      createdAt: context.now,
      updatedAt: context.now,
    }),
  );
  return { productIds: [...source.productIds], features, assets };
}

/** The entitlement's own copy of a usage asset, its id (and its usage records' ids) new; `ids` maps old to new. */
function copiedAsset(asset: MonitoredAssetRow, ids: Map<string, string>, context: CopyContext): MonitoredAssetRow {
  const id = context.newId();
  ids.set(asset.id, id);
  return {
    ...asset,
    id,
    entitlementId: context.entitlementId,
    meteredUsage: withNewId(asset.meteredUsage, context.newId),
    balanceUsage: withNewId(asset.balanceUsage, context.newId),
    createdAt: context.now,
    updatedAt: context.now,
  };
}

function remapped(assetId: string | null, ids: Map<string, string>): string | null {
  return assetId ? (ids.get(assetId) ?? null) : null;
}

/** A usage record's protobuf JSON with a new `id` when it had one. */
function withNewId(json: string | null, newId: () => string): string | null {
  if (!json) return json;
  const usage = JSON.parse(json) as { id?: string };
  return usage.id ? JSON.stringify({ ...usage, id: newId() }) : json;
}
