import type { MonitoredAsset } from "../../gen/provision/v1/catalog_pb.js";
import { invalidField } from "../platform/errors.js";
import { Violations } from "../platform/validation.js";
import type { IdsAndClock } from "./catalog-dependencies.js";
import { checkMonitoredAsset } from "./catalog-validation.js";
import type { MonitoredAssetRow } from "./entities.js";
import { balanceUsageText, durationText, meteredUsageText, toMonitoredAsset } from "./product-mapper.js";

export function requireAsset(asset: MonitoredAsset | undefined): MonitoredAsset {
  if (!asset) throw invalidField("monitoredAsset", "is required");
  const violations = new Violations();
  checkMonitoredAsset(violations, "", asset);
  violations.throwIfAny();
  return asset;
}

export function requireOwnAsset(assets: MonitoredAssetRow[], assetId: string, field = "meteredAssetId"): void {
  if (assetId && !assets.some((asset) => asset.id === assetId.toLowerCase())) {
    throw invalidField(field, "is not a monitored asset of this product");
  }
}

/** The stored form of `asset`: replacing `current` when given, else new with `newAssetId` (or a new id). */
export function assetRow(
  { clock, newId }: IdsAndClock,
  asset: MonitoredAsset,
  productId: string,
  current?: MonitoredAssetRow,
  newAssetId?: string,
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
    id: current?.id ?? newAssetId ?? newId(),
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
