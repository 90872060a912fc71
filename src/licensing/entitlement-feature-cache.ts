import type { EntitlementFeatureRow } from "./entities.js";

/** Feature rows kept in all, about 1 KB of heap each. */
const FEATURES_KEPT = 20_000;

/**
 * Each entitlement's features as of one revision of its row, per instance. An entitlement's features change
 * only in the transaction that increments its revision, under its row lock: the features kept for the revision
 * an activation read under that lock are the ones stored, so nothing needs telling when they change.
 * Kept rows are shared between licenses and never changed.
 */
export class EntitlementFeatureCache {
  private readonly byEntitlement = new Map<string, { revision: number; features: EntitlementFeatureRow[] }>();
  private kept = 0;

  get(entitlementId: string, revision: number): EntitlementFeatureRow[] | undefined {
    const entry = this.byEntitlement.get(entitlementId);
    return entry?.revision === revision ? entry.features : undefined;
  }

  remember(entitlementId: string, revision: number, features: EntitlementFeatureRow[]): void {
    this.forget(entitlementId);
    if (features.length > FEATURES_KEPT / 10) return;
    this.byEntitlement.set(entitlementId, { revision, features });
    this.kept += features.length + 1;
    while (this.kept > FEATURES_KEPT) this.forget(this.byEntitlement.keys().next().value as string);
  }

  private forget(entitlementId: string): void {
    const entry = this.byEntitlement.get(entitlementId);
    if (!entry) return;
    this.byEntitlement.delete(entitlementId);
    this.kept -= entry.features.length + 1;
  }
}
