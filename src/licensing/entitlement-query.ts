import {
  type FilterTerm,
  type ListColumns,
  type QueryFieldSpec,
  queryLanguage,
  type SortKey,
} from "../platform/list-query.js";

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

/** The columns of the fields, and those a free-text term is matched against. */
export const ENTITLEMENT_LIST: ListColumns<EntitlementField> = {
  columns: ENTITLEMENT_COLUMNS,
  textColumns: ["name", "customer_contact_email", "order_id", "license_key"],
};

const language = queryLanguage<EntitlementField>(ENTITLEMENT_FIELDS, "createdAt");

/**
 * Parses the ListEntitlements `filter`: the ListProducts syntax over ENTITLEMENT_FIELDS. A customerId is stored
 * lower-cased (a UUID), so the value compared with it is too.
 */
export function parseEntitlementFilter(input: string): EntitlementFilterTerm[] {
  return language
    .parseFilter(input)
    .map((term) =>
      term.kind === "compare" && term.field === "customerId" && typeof term.value === "string"
        ? { ...term, value: term.value.toLowerCase() }
        : term,
    );
}

/** Parses the ListEntitlements `sortOrder`; blank sorts by createdAt. */
export function parseEntitlementSort(input: string): EntitlementSortKey[] {
  return language.parseSort(input);
}
