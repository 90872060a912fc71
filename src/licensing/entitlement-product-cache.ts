import { setNewest } from "../platform/bounded-map.js";
import type { LicensedProducts } from "./session-store.js";

/** Entitlements whose products one instance keeps. */
const ENTITLEMENTS_KEPT = 20_000;

interface KeptProducts {
  ids: string[];
  /** Whether the entitlement's policy, when last read here, had the product-code rule. */
  codesWanted: boolean;
}

/**
 * Each entitlement's licensed product ids, per instance. They are written once, in the transaction that creates
 * the entitlement, and no call changes them, so ids kept here need no invalidation. Products' codes and versions
 * can change (UpdateProduct): they are not kept, and the product-code rule reads them in its own transaction.
 */
export class EntitlementProductCache {
  private readonly byEntitlement = new Map<string, KeptProducts>();

  /**
   * The kept ids, when a transaction's first batch need not read the entitlement's products: they are kept, and
   * it does not apply the activation rules or the policy last read had no product-code rule. Taken once, before
   * the batch: an entry may be dropped while it runs.
   */
  keptIds(entitlementId: string, appliesRules: boolean): string[] | undefined {
    const kept = this.byEntitlement.get(entitlementId);
    return kept && !(appliesRules && kept.codesWanted) ? kept.ids : undefined;
  }

  /**
   * Keeps the ids, and whether the policy read with them asked for the products' codes: then the next activation
   * reads them with its first batch instead of in a round trip of their own. The entry moves to the back of the
   * eviction order.
   */
  remember(entitlementId: string, ids: string[], codesWanted: boolean): void {
    setNewest(this.byEntitlement, entitlementId, { ids, codesWanted }, ENTITLEMENTS_KEPT);
  }
}

/** The products as read in a batch, or else the ids kept before it. */
export function productsReadOrKept(
  read: LicensedProducts | undefined,
  keptIds: string[] | undefined,
): LicensedProducts {
  if (read) return read;
  if (!keptIds) throw new Error("an entitlement's products were neither read nor kept");
  return { ids: keptIds, current: null };
}
