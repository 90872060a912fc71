import type { Product } from "../../gen/provision/v1/catalog_pb.js";
import type { Clock } from "../platform/clock.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { Logger } from "../platform/logger.js";

export const PRODUCT_CHANGED_CHANNEL = "product-changed";
const CAPACITY = 10_000;
/**
 * Products, features and monitored assets kept in all: a product may hold 1,000 features, and 10,000 such
 * would take gigabytes. Each takes about 2.5 KB of heap as a message, so some 50 MB at most.
 */
const MAX_ITEMS = 20_000;
/** A bound on staleness should an invalidation never arrive (published while Redis was down). */
export const PRODUCT_MAX_AGE_MS = 30_000;

/**
 * GetProduct's product (with its features and assets) per instance, keyed by provider and product id, dropped
 * on every instance when a write changes the product. A product not found is never kept. A kept product is
 * frozen: every caller shares it, so a change to it would be a change to every later answer.
 */
export class ProductCache {
  private constructor(
    private readonly cache: InvalidatedCache<Product | null>,
    private readonly logger: Logger,
  ) {}

  static async create(bus: InvalidationBus, clock: Clock, logger: Logger): Promise<ProductCache> {
    const cache = await InvalidatedCache.create<Product | null>({
      channel: PRODUCT_CHANGED_CHANNEL,
      bus,
      clock,
      capacity: CAPACITY,
      maxWeight: MAX_ITEMS,
      weigh: (product) => 1 + (product?.features.length ?? 0) + (product?.monitoredAssets.length ?? 0),
      maxAgeMs: PRODUCT_MAX_AGE_MS,
      keeps: (product) => product !== null,
    });
    return new ProductCache(cache, logger);
  }

  /** The provider's product, from memory or else from `load`; null when the provider has no such product. */
  get(providerId: string, productId: string, load: () => Promise<Product | null>): Promise<Product | null> {
    return this.cache.get(keyOf(providerId, productId), async () => {
      const product = await load();
      return product && deepFreeze(product);
    });
  }

  /**
   * Tells every instance (this one included) that these products of the provider changed; call it once the
   * change is committed. The change stands even when other instances cannot be told: it is logged, and their
   * copies expire within PRODUCT_MAX_AGE_MS.
   */
  async changed(providerId: string, productIds: string[]): Promise<void> {
    if (productIds.length === 0) return;
    await this.cache.changed(...productIds.map((productId) => keyOf(providerId, productId))).catch((error: Error) => {
      this.logger.warn(
        { err: { message: error.message }, products: productIds.length },
        "could not tell other instances of a product change",
      );
    });
  }
}

/** A product's key on PRODUCT_CHANGED_CHANNEL: every cache of product facts drops its entry on it. */
export function keyOf(providerId: string, productId: string): string {
  return `${providerId}/${productId}`;
}

function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || ArrayBuffer.isView(value) || Object.isFrozen(value)) {
    return value;
  }
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}
