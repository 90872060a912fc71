import type { Clock } from "../platform/clock.js";
import { isUniqueViolation } from "../platform/database.js";
import { conflict, DomainError, invalidField, notFound } from "../platform/errors.js";
import { isUuid } from "../platform/validation.js";
import type { CatalogDependencies } from "./catalog-dependencies.js";
import { type CatalogTransaction, uniqueRuleOf } from "./catalog-repository.js";
import type { ProductRow } from "./entities.js";

/** The product, locked until the write commits: 404 unless it is the provider's, 412 while it is locked. */
export async function lockedProduct(
  tx: CatalogTransaction,
  providerId: string,
  productId: string,
): Promise<ProductRow> {
  const row = await tx.lockProduct(providerId, productId);
  if (!row) throw notFound("product", productId);
  if (row.isLocked)
    throw new DomainError("failed-precondition", `product ${productId} is locked`, { slug: "product-locked" });
  return row;
}

/** lockedProduct, and 404 for a deleted product too. */
export async function unlockedProduct(
  tx: CatalogTransaction,
  providerId: string,
  productId: string,
): Promise<ProductRow> {
  const row = await lockedProduct(tx, providerId, productId);
  if (row.isDeleted) throw notFound("product", productId);
  return row;
}

/** Stores the product's row as its next revision. */
export async function saveRevision(clock: Clock, tx: CatalogTransaction, row: ProductRow): Promise<void> {
  row.revisionNumber += 1;
  row.updatedAt = clock.now();
  await tx.updateProduct(row);
}

/** Refuses an operation after which a product would hold more than `cap` of something. */
export function requireRoom(field: string, count: number, cap: number, what: string): void {
  if (count > cap) {
    throw invalidField(
      field,
      `a product holds at most ${cap} ${what} (soft-deleted ones included); this would make ${count}`,
    );
  }
}

/** The lowercased UUIDs among the ids elements ask for. */
export function wantedIds(elements: { id: string }[]): string[] {
  return elements.map((element) => element.id.toLowerCase()).filter(isUuid);
}

/** The order features and assets are read in: by creation, then id. */
export function byCreation(a: { createdAt: Date; id: string }, b: { createdAt: Date; id: string }): number {
  return a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Whether any column of `next` differs from `current` (dates compared by instant). */
export function differs<T extends object>(next: T, current: T): boolean {
  return Object.keys(next).some((key) => {
    const [a, b] = [next[key as keyof T], current[key as keyof T]];
    return a instanceof Date && b instanceof Date ? a.getTime() !== b.getTime() : a !== b;
  });
}

/** What a broken unique rule is about, for its 409. */
export interface UniqueSubject {
  productCode?: string;
  featureCode?: string;
  metricName?: string;
}

/** The features and monitored assets of a product, as a change to one of them reads them. */
export type ProductChildren = Awaited<ReturnType<CatalogTransaction["children"]>>;

/**
 * One change to a product's features or monitored assets, in a transaction holding the product (unlocked, not
 * deleted): `change` answers its result and whether it wrote anything, which makes the product's next revision.
 * Once committed, every instance drops its copy of the product. A broken unique rule answers 409 about `subject`.
 */
export async function changeChildren<T>(
  deps: CatalogDependencies,
  providerId: string,
  productId: string,
  subject: UniqueSubject,
  change: (tx: CatalogTransaction, children: ProductChildren) => Promise<{ result: T; changed: boolean }>,
): Promise<T> {
  const result = await translateUniqueViolations(
    () =>
      deps.repository.transaction(async (tx) => {
        const product = await unlockedProduct(tx, providerId, productId);
        const outcome = await change(tx, await tx.children(productId));
        if (outcome.changed) await saveRevision(deps.clock, tx, product);
        return outcome.result;
      }),
    subject,
  );
  await deps.products.changed(providerId, [productId]);
  return result;
}

/** Turns a broken unique rule into the 409 the caller can act on. */
export async function translateUniqueViolations<T>(work: () => Promise<T>, subject: UniqueSubject = {}): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    switch (uniqueRuleOf(error)) {
      case "product-code":
        throw conflict(
          subject.productCode !== undefined
            ? `a product with productCode ${JSON.stringify(subject.productCode.trim())} already exists`
            : "a product with that productCode already exists",
          "product-code-taken",
        );
      case "feature-code":
        throw conflict(
          `a feature with ${subject.featureCode ? `featureCode ${JSON.stringify(subject.featureCode.trim())}` : "that featureCode"} already exists on this product`,
          "feature-code-taken",
        );
      case "asset-metric":
        throw conflict(
          `a monitored asset with ${subject.metricName ? `metricName ${JSON.stringify(subject.metricName.trim())}` : "that metricName"} already exists on this product`,
          "metric-name-taken",
        );
      default:
        throw conflict("the resource already exists", "already-exists");
    }
  }
}
