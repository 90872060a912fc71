import type { LicensedProducts } from "./session-store.js";

/** Entitlements whose products one instance keeps. */
const ENTITLEMENTS_KEPT = 20_000;

interface KeptProducts {
  ids: string[];
  /** Whether the entitlement's policy, when last read here, had the product-code rule (see codesWanted). */
  codesWanted: boolean;
}

/**
 * Each entitlement's licensed product ids, per instance. They are written once, in the transaction that creates
 * the entitlement, and never change (deleting the entitlement deletes them with it), so ids kept here need no
 * invalidation. Products' codes and versions can change (UpdateProduct): they are not kept, and the product-code
 * rule reads them in its own transaction.
 */
export class EntitlementProductCache {
  private readonly byEntitlement = new Map<string, KeptProducts>();

  /**
   * Whether a transaction's first batch reads the entitlement's products: when their ids are not kept, or when
   * it applies the activation rules and the policy last read had the product-code rule.
   */
  mustRead(entitlementId: string, appliesRules: boolean): boolean {
    const kept = this.byEntitlement.get(entitlementId);
    return kept === undefined || (appliesRules && kept.codesWanted);
  }

  /** The products as read (when they were), or else their kept ids. */
  productsOf(entitlementId: string, read: LicensedProducts | undefined): LicensedProducts {
    if (read) return read;
    const kept = this.byEntitlement.get(entitlementId);
    if (!kept) throw new Error(`the products of entitlement ${entitlementId} were neither read nor kept`);
    return { ids: kept.ids, current: null };
  }

  /**
   * Keeps the ids, and whether the policy read with them asked for the products' codes: then the next activation
   * reads them with its first batch instead of in a round trip of their own.
   */
  remember(entitlementId: string, ids: string[], codesWanted: boolean): void {
    const kept = this.byEntitlement.get(entitlementId);
    if (kept?.codesWanted === codesWanted) return;
    this.byEntitlement.delete(entitlementId);
    this.byEntitlement.set(entitlementId, { ids, codesWanted });
    if (this.byEntitlement.size > ENTITLEMENTS_KEPT) {
      this.byEntitlement.delete(this.byEntitlement.keys().next().value as string);
    }
  }
}
