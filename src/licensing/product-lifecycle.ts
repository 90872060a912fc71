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
    const statuses = await this.statusesOf(providerId, facts.productIds, transaction);
    const taking = facts.productIds.filter((id) => statusAllows(statuses.get(id) ?? 0, step));
    if (taking.length === facts.productIds.length) return facts;
    const products = facts.products?.filter((product) => taking.includes(product.id)) ?? null;
    return { ...facts, productIds: taking, products, productsUnavailable: taking.length === 0 };
  }

  /**
   * The products' statuses (null: no such product), from memory; those missing are read in one statement of the
   * caller's transaction (a read from the pool, made while the transaction holds one of its connections, could
   * wait on the pool itself when every connection is held so). Their loads start before the read is sent, so a
   * change published meanwhile keeps what it read from being kept.
   */
  private async statusesOf(
    providerId: string,
    productIds: string[],
    transaction: BatchedTransaction,
  ): Promise<Map<string, number | null>> {
    const kept = new Map(productIds.map((id) => [id, this.cache.peek(keyOf(providerId, id))]));
    const missing = productIds.filter((id) => kept.get(id) === undefined);
    if (missing.length === 0) return kept as Map<string, number | null>;
    const read = readStatuses(providerId, missing, transaction);
    const loads = missing.map((id) => this.cache.get(keyOf(providerId, id), async () => (await read).get(id) ?? null));
    // The read awaited with the loads: it fails the call even where another caller's load served the id.
    const [, ...loaded] = await Promise.all([read, ...loads]);
    for (const [index, id] of missing.entries()) kept.set(id, loaded[index]);
    return kept as Map<string, number | null>;
  }
}

async function readStatuses(
  providerId: string,
  productIds: string[],
  transaction: BatchedTransaction,
): Promise<Map<string, number>> {
  const [rows] = await transaction.run([
    {
      sql: `SELECT id, status FROM products WHERE provider_id = ? AND id IN (${productIds.map(() => "?").join(", ")})`,
      parameters: [providerId, ...productIds],
    },
  ]);
  return new Map((rows as { id: string; status: unknown }[]).map((row) => [row.id, Number(row.status)]));
}

/** 403 `product-unavailable`: none of the entitlement's products takes the step. */
export function productUnavailable(step: LicensingStep): DomainError {
  const what =
    step === "renew" ? "renewals: they are retired" : "new activations: they are in draft, suspended or retired";
  return new DomainError("permission-denied", `the entitlement's products take no ${what}`, {
    slug: "product-unavailable",
  });
}
