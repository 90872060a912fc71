import { DomainError } from "../platform/errors.js";
import type { MeterRef } from "./meter-counters.js";
import type { UsageAsset } from "./usage-assets.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import type { EntitlementUsage } from "./usage-directory.js";

/** The session's entitlement with its assets; a session whose entitlement is gone has nothing to meter. */
export async function entitlementUsageOf(deps: UsageDependencies, entitlementId: string): Promise<EntitlementUsage> {
  const usage = await deps.directory.of(entitlementId);
  if (!usage) throw new DomainError("not-found", "the session's entitlement no longer exists", { slug: "not-found" });
  return usage;
}

/** The asset a metric name names, with a usage model (metered or credit balance). */
export function meteredAssetOf(usage: EntitlementUsage, metric: string, field: string): UsageAsset {
  const asset = usage.byMetric.get(metric);
  if (!asset) {
    const known = [...usage.byMetric.keys()].join(", ") || "none";
    throw new DomainError("not-found", `${metric} is not a metric of this entitlement (its metrics: ${known})`, {
      slug: "metric-not-found",
      errors: [{ field, message: "names no monitored asset of the session's entitlement" }],
    });
  }
  if (!asset.metered && !asset.balance) {
    throw invalidMetric(field, `${metric} is informational (metricType 0): it has no usage to reserve`);
  }
  return asset;
}

/**
 * An asset's counter of the period holding `at` (a credit balance's: its current period); undefined when the asset
 * (or its usage model) is gone.
 */
export async function refOfAsset(deps: UsageDependencies, assetId: string, at: Date): Promise<MeterRef | undefined> {
  const entitlementId = await deps.store.entitlementOfAsset(assetId);
  const usage = entitlementId ? await deps.directory.of(entitlementId) : null;
  const asset = usage?.assets.find((candidate) => candidate.id === assetId);
  return usage && asset ? deps.counters.refOf(usage, asset, at) : undefined;
}

function invalidMetric(field: string, message: string): DomainError {
  return new DomainError("invalid-argument", message, { slug: "metric-not-metered", errors: [{ field, message }] });
}
