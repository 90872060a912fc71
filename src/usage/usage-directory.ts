import { ENTITLEMENT_CHANGED_CHANNEL } from "../licensing/licensing-caches.js";
import type { Clock } from "../platform/clock.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import { type UsageAsset, usageAssetOf } from "./usage-assets.js";
import type { UsageStore } from "./usage-store.js";

/** An entitlement's monitored assets, as metering reads them. */
export interface EntitlementUsage {
  entitlementId: string;
  providerId: string;
  customerId: string;
  assets: UsageAsset[];
  /** By metricName; a name held by assets of two products is its first (by product id). */
  byMetric: Map<string, UsageAsset>;
}

const MAX_AGE_MS = 30_000;

/** Each entitlement's assets, kept per instance and dropped on every instance when the entitlement changes. */
export class UsageDirectory {
  private constructor(
    private readonly store: UsageStore,
    private readonly cache: InvalidatedCache<EntitlementUsage | null>,
  ) {}

  static async create(store: UsageStore, bus: InvalidationBus, clock: Clock): Promise<UsageDirectory> {
    const cache = await InvalidatedCache.create<EntitlementUsage | null>({
      channel: ENTITLEMENT_CHANGED_CHANNEL,
      bus,
      clock,
      capacity: 20_000,
      maxAgeMs: MAX_AGE_MS,
      keeps: (value) => value !== null,
    });
    return new UsageDirectory(store, cache);
  }

  async of(entitlementId: string): Promise<EntitlementUsage | null> {
    return this.cache.get(entitlementId, () => this.load(entitlementId));
  }

  private async load(entitlementId: string): Promise<EntitlementUsage | null> {
    const found = await this.store.entitlementAssets(entitlementId);
    if (!found) return null;
    const assets = found.assets.map(usageAssetOf);
    const byMetric = new Map<string, UsageAsset>();
    for (const asset of assets) if (!byMetric.has(asset.metricName)) byMetric.set(asset.metricName, asset);
    return { entitlementId, providerId: found.providerId, customerId: found.customerId, assets, byMetric };
  }
}
