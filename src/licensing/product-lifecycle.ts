import { ProductStatus } from "../../gen/provision/v1/catalog_pb.js";
import { keyOf, PRODUCT_CHANGED_CHANNEL, PRODUCT_MAX_AGE_MS } from "../catalog/product-cache.js";
import type { Clock } from "../platform/clock.js";
import { DomainError } from "../platform/errors.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { BatchedTransaction } from "../platform/statement-batch.js";
import type { EntitlementFacts } from "./activation-rules.js";

/** What a product's lifecycle status (catalog.proto's ProductStatus) may refuse. */
export type LicensingStep = "entitle" | "activate" | "renew";

const REFUSED_BY: Record<LicensingStep, ReadonlySet<number>> = {
  entitle: new Set([ProductStatus.DRAFT, ProductStatus.SUSPENDED, ProductStatus.END_OF_SALE, ProductStatus.RETIRED]),
  activate: new Set([ProductStatus.DRAFT, ProductStatus.SUSPENDED, ProductStatus.RETIRED]),
  renew: new Set([ProductStatus.RETIRED]),
};

const STATUSES_KEPT = 50_000;

/** Whether a product of this status takes the step. */
export function statusAllows(status: number, step: LicensingStep): boolean {
  return !REFUSED_BY[step].has(status);
}

/**
 * Each product's lifecycle status, per instance, dropped on every instance when the product changes (the channel
 * the GetProduct cache listens on): activations and renewals read a status from the database only when missing.
 */
export class ProductStatuses {
  private constructor(private readonly cache: InvalidatedCache<number | null>) {}

  static async create(bus: InvalidationBus, clock: Clock): Promise<ProductStatuses> {
    const cache = await InvalidatedCache.create<number | null>({
      channel: PRODUCT_CHANGED_CHANNEL,
      bus,
      clock,
      capacity: STATUSES_KEPT,
      maxAgeMs: PRODUCT_MAX_AGE_MS,
    });
    return new ProductStatuses(cache);
  }

  /**
   * The entitlement's facts with only the products that take the step (a license names no other), and
   * `productsUnavailable` when it has products and none does (the step is then refused: `productUnavailable`).
   */
  async licensable(
    providerId: string,
    facts: EntitlementFacts,
    step: LicensingStep,
    transaction: BatchedTransaction,
  ): Promise<EntitlementFacts> {
    const [licensed] = await this.licensableEach([{ providerId, facts }], step, transaction);
    return licensed;
  }

  /** `licensable` for each entitlement, with the statuses missing for all of them read in one statement. */
  async licensableEach(
    entitlements: readonly { providerId: string; facts: EntitlementFacts }[],
    step: LicensingStep,
    transaction: BatchedTransaction,
  ): Promise<EntitlementFacts[]> {
    const named = entitlements.flatMap(({ providerId, facts }) =>
      facts.productIds.map((productId) => ({ providerId, productId })),
    );
    const statuses = await this.statusesOf(named, transaction);
    return entitlements.map(({ providerId, facts }) => {
      const taking = facts.productIds.filter((id) => statusAllows(statuses.get(keyOf(providerId, id)) ?? 0, step));
      if (taking.length === facts.productIds.length) return facts;
      const products = facts.products?.filter((product) => taking.includes(product.id)) ?? null;
      return { ...facts, productIds: taking, products, productsUnavailable: taking.length === 0 };
    });
  }

  /**
   * The products' statuses by `keyOf` (null: no such product of that provider), from memory; those missing are
   * read in one statement of the caller's transaction (a read from the pool, made while the transaction holds one
   * of its connections, could wait on the pool itself when every connection is held so). Their loads start before
   * the read is sent, so a change published meanwhile keeps what it read from being kept.
   */
  private async statusesOf(
    products: ProductOfProvider[],
    transaction: BatchedTransaction,
  ): Promise<Map<string, number | null>> {
    const byKey = new Map(products.map((product) => [keyOf(product.providerId, product.productId), product]));
    const kept = new Map([...byKey.keys()].map((key) => [key, this.cache.peek(key)]));
    const missing = [...byKey].filter(([key]) => kept.get(key) === undefined);
    if (missing.length === 0) return kept as Map<string, number | null>;
    const read = readStatuses(
      missing.map(([, product]) => product),
      transaction,
    );
    const loads = missing.map(([key]) => this.cache.get(key, async () => (await read).get(key) ?? null));
    // The read awaited with the loads: it fails the call even where another caller's load served the key.
    const [, ...loaded] = await Promise.all([read, ...loads]);
    for (const [index, [key]] of missing.entries()) kept.set(key, loaded[index]);
    return kept as Map<string, number | null>;
  }
}

interface ProductOfProvider {
  providerId: string;
  productId: string;
}

/** The products' statuses by `keyOf` (a product's own provider's key only). */
async function readStatuses(
  products: ProductOfProvider[],
  transaction: BatchedTransaction,
): Promise<Map<string, number>> {
  const pairs = products.map(({ providerId, productId }) => [providerId, productId]);
  const [rows] = await transaction.run([
    {
      sql: `SELECT id, provider_id, status FROM products WHERE (provider_id, id) IN (${pairs.map(() => "(?, ?)").join(", ")})`,
      parameters: pairs.flat(),
    },
  ]);
  const statuses = (rows as { id: string; provider_id: string; status: unknown }[]).map(
    (row) => [keyOf(row.provider_id, row.id), Number(row.status)] as const,
  );
  return new Map(statuses);
}

/** 403 `product-unavailable`: none of the entitlement's products takes the step. */
export function productUnavailable(step: LicensingStep): DomainError {
  const what =
    step === "renew" ? "renewals: they are retired" : "new activations: they are in draft, suspended or retired";
  return new DomainError("permission-denied", `the entitlement's products take no ${what}`, {
    slug: "product-unavailable",
  });
}
