import { type FilterTerm, type QueryFieldSpec, queryLanguage, type SortKey } from "../catalog/product-query.js";

/** The fields ListEntitlements can filter on (all of them) and sort by (`sortable`), by JSON name. */
export const ENTITLEMENT_FIELDS = {
  name: { type: "string", sortable: true },
  customerId: { type: "string", sortable: true },
  customerContactEmail: { type: "string", sortable: true },
  orderId: { type: "string", sortable: true },
  reference: { type: "string", sortable: true },
  licenseKey: { type: "string", sortable: true },
  isRevoked: { type: "boolean", sortable: false },
  isTemplateForNewEntitlements: { type: "boolean", sortable: false },
  isEntitlementTrial: { type: "boolean", sortable: false },
  expirationDateTime: { type: "date-time", sortable: true },
  createdAt: { type: "date-time", sortable: true },
} as const satisfies Record<string, QueryFieldSpec>;

export type EntitlementField = keyof typeof ENTITLEMENT_FIELDS;
export type EntitlementFilterTerm = FilterTerm<EntitlementField>;
export type EntitlementSortKey = SortKey<EntitlementField>;

/** The column of each field (in the entitlements table). */
export const ENTITLEMENT_COLUMNS: Record<EntitlementField, string> = {
  name: "name",
  customerId: "customer_id",
  customerContactEmail: "customer_contact_email",
  orderId: "order_id",
  reference: "reference",
  licenseKey: "license_key",
  isRevoked: "is_revoked",
  isTemplateForNewEntitlements: "is_template",
  isEntitlementTrial: "is_entitlement_trial",
  expirationDateTime: "expiration_date_time",
  createdAt: "created_at",
};

/** The entity property a field's value is stored through (for the driver's conversion of filter values). */
export function entitlementPropertyOf(field: EntitlementField): string {
  return field === "isTemplateForNewEntitlements" ? "isTemplate" : field;
}

/** The columns a free-text term is matched against. */
export const ENTITLEMENT_TEXT_COLUMNS = ["name", "customer_contact_email", "order_id", "license_key"];

const language = queryLanguage<EntitlementField>(ENTITLEMENT_FIELDS, "createdAt");

/** Parses the ListEntitlements `filter`: the ListProducts syntax over ENTITLEMENT_FIELDS. */
export function parseEntitlementFilter(input: string): EntitlementFilterTerm[] {
  return language.parseFilter(input);
}

/** Parses the ListEntitlements `sortOrder`; blank sorts by createdAt. */
export function parseEntitlementSort(input: string): EntitlementSortKey[] {
  return language.parseSort(input);
}

/**
 * The WHERE clause of a filter (every term must hold), with its parameters; `storedValue` converts a compared
 * value as the driver stores it in the field's column.
 */
export function entitlementFilterSql(
  terms: EntitlementFilterTerm[],
  storedValue: (field: EntitlementField, value: unknown) => unknown,
): { clauses: string[]; parameters: unknown[] } {
  const clauses: string[] = [];
  const parameters: unknown[] = [];
  for (const term of terms) {
    if (term.kind === "text") {
      const pattern = containsPattern(term.text);
      clauses.push(`(${ENTITLEMENT_TEXT_COLUMNS.map((column) => `LOWER(${column}) LIKE ? ESCAPE '!'`).join(" OR ")})`);
      parameters.push(...ENTITLEMENT_TEXT_COLUMNS.map(() => pattern));
      continue;
    }
    const column = ENTITLEMENT_COLUMNS[term.field];
    if (term.op === "~") {
      clauses.push(`LOWER(${column}) LIKE ? ESCAPE '!'`);
      parameters.push(containsPattern(String(term.value)));
    } else if (term.op === "!=") {
      clauses.push(`(${column} IS NULL OR ${column} <> ?)`);
      parameters.push(storedValue(term.field, term.value));
    } else {
      clauses.push(`${column} ${term.op} ?`);
      parameters.push(storedValue(term.field, term.value));
    }
  }
  return { clauses, parameters };
}

/** ORDER BY of a sort, ending with id so that pages never overlap. */
export function entitlementOrderSql(sort: EntitlementSortKey[]): string {
  return sort
    .map((key) => `${ENTITLEMENT_COLUMNS[key.field]} ${key.direction === "desc" ? "DESC" : "ASC"}`)
    .concat("id ASC")
    .join(", ");
}

function containsPattern(text: string): string {
  return `%${text.toLowerCase().replace(/[!%_]/g, (character) => `!${character}`)}%`;
}
