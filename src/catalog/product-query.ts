import { type FilterTerm, type QueryFieldSpec, queryLanguage, type SortKey } from "../platform/list-query.js";

/** The fields ListProducts can filter on (all of them) and sort by (`sortable`), by JSON name. */
export const PRODUCT_FIELDS = {
  productCode: { type: "string", sortable: true },
  productVersion: { type: "string", sortable: true },
  name: { type: "string", sortable: true },
  description: { type: "string", sortable: false },
  externalId: { type: "string", sortable: true },
  status: { type: "int", sortable: true, min: 0, max: 7 },
  isLocked: { type: "boolean", sortable: false },
  isDeleted: { type: "boolean", sortable: false },
  createdAt: { type: "date-time", sortable: true },
  updatedAt: { type: "date-time", sortable: true },
  expirationDate: { type: "date-time", sortable: true },
  revisionNumber: { type: "int", sortable: true, min: 0, max: 2_147_483_647 },
} as const satisfies Record<string, QueryFieldSpec>;

export type ProductField = keyof typeof PRODUCT_FIELDS;

/** The fields a free-text term of ListProducts is matched against. */
export const TEXT_SEARCH_FIELDS: readonly ProductField[] = ["productCode", "name", "externalId"];

const productQuery = queryLanguage<ProductField>(PRODUCT_FIELDS, "createdAt");

/** Parses the ListProducts `filter`: whitespace-separated terms that must all hold. Blank input gives []. */
export function parseProductFilter(input: string): FilterTerm<ProductField>[] {
  return productQuery.parseFilter(input);
}

/** Parses the ListProducts `sortOrder`: `name,-createdAt`, `+status`, `name desc`. Blank input sorts by createdAt. */
export function parseProductSort(input: string): SortKey<ProductField>[] {
  return productQuery.parseSort(input);
}
