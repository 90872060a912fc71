import type { EntityManager } from "typeorm";
import type { EntitlementFeatureUpdate } from "../../gen/provision/v1/entitlement_pb.js";
import { storedDate } from "../catalog/product-mapper.js";
import { Violations } from "../platform/validation.js";
import type { EntitlementFeatureRow } from "./entities.js";
import type { EntitlementRepository } from "./entitlement-repository.js";

/**
 * Applies an update's `features` to the entitlement's features, each matched by id or else featureCode:
 * `value` only where canModifyValueOnEntitlement, `isEnabled` only where canModifyEnabledOnEntitlement (a value
 * sent as it stands changes nothing and is never refused: an entitlement read and sent back is accepted).
 * Every refusal is reported at once, naming the field; nothing is written then. Two elements naming one feature
 * are refused (the second named). Only features that differ afterwards are written: true when one did.
 */
export async function applyFeatureUpdates(
  repository: EntitlementRepository,
  manager: EntityManager,
  entitlementId: string,
  updates: EntitlementFeatureUpdate[],
  now: Date,
): Promise<boolean> {
  if (updates.length === 0) return false;
  const features = await repository.featuresOf(manager, [entitlementId]);
  const byId = new Map(features.map((feature) => [feature.id, feature]));
  const byCode = new Map<string, EntitlementFeatureRow[]>();
  for (const feature of features) {
    if (feature.featureCode) byCode.set(feature.featureCode, [...(byCode.get(feature.featureCode) ?? []), feature]);
  }
  const violations = new Violations();
  const named = new Set<EntitlementFeatureRow>();
  const changed = new Set<EntitlementFeatureRow>();
  for (const [index, update] of updates.entries()) {
    const prefix = `features[${index}].`;
    const feature = matchOf(update, byId, byCode, violations, prefix);
    if (!feature) continue;
    if (named.has(feature)) {
      violations.add(`features[${index}]`, "names a feature an earlier element of the list names");
      continue;
    }
    named.add(feature);
    if (applyFeatureUpdate(feature, update, violations, prefix)) changed.add(feature);
  }
  violations.throwIfAny();
  for (const feature of changed) {
    feature.updatedAt = now;
    await repository.updateFeature(manager, feature);
  }
  return changed.size > 0;
}

/** Applies one element to its feature: true when the feature differs afterwards. */
function applyFeatureUpdate(
  feature: EntitlementFeatureRow,
  update: EntitlementFeatureUpdate,
  violations: Violations,
  prefix: string,
): boolean {
  const before = { value: feature.value, isEnabled: feature.isEnabled, expiration: feature.featureExpiration };
  if (update.value !== undefined && (update.value || null) !== feature.value) {
    if (feature.canModifyValueOnEntitlement) feature.value = update.value || null;
    else violations.add(`${prefix}value`, "cannot be changed on an entitlement (canModifyValueOnEntitlement is false)");
  }
  if (update.isEnabled !== undefined && update.isEnabled !== feature.isEnabled) {
    if (feature.canModifyEnabledOnEntitlement) feature.isEnabled = update.isEnabled;
    else
      violations.add(
        `${prefix}isEnabled`,
        "cannot be changed on an entitlement (canModifyEnabledOnEntitlement is false)",
      );
  }
  if (update.clearFeatureExpiration) feature.featureExpiration = null;
  else if (update.featureExpiration) feature.featureExpiration = storedDate(update.featureExpiration);
  return (
    before.value !== feature.value ||
    before.isEnabled !== feature.isEnabled ||
    before.expiration?.getTime() !== feature.featureExpiration?.getTime()
  );
}

function matchOf(
  update: EntitlementFeatureUpdate,
  byId: Map<string, EntitlementFeatureRow>,
  byCode: Map<string, EntitlementFeatureRow[]>,
  violations: Violations,
  prefix: string,
): EntitlementFeatureRow | undefined {
  if (update.id !== "") {
    const feature = byId.get(update.id.toLowerCase());
    if (!feature) violations.add(`${prefix}id`, "is not a feature of this entitlement");
    return feature;
  }
  const matches = byCode.get(update.featureCode.trim()) ?? [];
  if (matches.length === 0) violations.add(`${prefix}featureCode`, "is not the code of a feature of this entitlement");
  if (matches.length > 1) {
    violations.add(`${prefix}featureCode`, "is the code of features of several products; send the feature's id");
  }
  return matches.length === 1 ? matches[0] : undefined;
}
