import type { Feature } from "../../gen/provision/v1/catalog_pb.js";
import { conflict, invalidField } from "../platform/errors.js";
import { isUuid } from "../platform/validation.js";
import type { IdsAndClock } from "./catalog-dependencies.js";
import type { CatalogWrites } from "./catalog-repository.js";
import { MAX_FEATURES_PER_PRODUCT } from "./catalog-validation.js";
import { byCreation, differs, requireRoom } from "./catalog-writes.js";
import type { FeatureRow, MonitoredAssetRow } from "./entities.js";

/** The columns a feature message sets, as stored (codes trimmed, ids lowercased, empty texts null). */
export function featureFields(feature: Omit<Partial<Feature>, "$typeName">) {
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

/**
 * Plans feature elements by id, else by featureCode, else as new features, into `writes`; answers the
 * product's features afterwards. An id that is not a feature of the product is refused on update and kept
 * for a new feature on import (when no row holds it: `taken`).
 */
export function planFeatures(
  { clock, newId }: IdsAndClock,
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
  /** The element that named each feature this request writes: a second one would silently override it. */
  const namedBy = new Map<string, number>();
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
    const earlier = current ? namedBy.get(current.id) : undefined;
    if (earlier !== undefined) throw invalidField(prefix, `names the same feature as ${field}[${earlier}]`);
    if (current) namedBy.set(current.id, index);
    // On update, deleting a feature the product does not have changes nothing (import stores what it is given).
    if (!current && feature.isDeleted && unknownId === "reject") continue;
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
    namedBy.set(row.id, index);
    if (row.featureCode) byCode.set(row.featureCode, row);
  }
  const features = [...byId.values()].sort(byCreation);
  requireRoom(field, features.length, MAX_FEATURES_PER_PRODUCT, "features");
  writes.insertFeatures.push(...inserts.values());
  writes.updateFeatures.push(...updates.values());
  return features;
}
