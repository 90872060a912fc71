import test, { type ExecutionContext } from "ava";
import {
  PRODUCT_FIELDS,
  type ProductField,
  parseProductFilter,
  parseProductSort,
  TEXT_SEARCH_FIELDS,
} from "../../src/catalog/product-query.js";
import { DomainError } from "../../src/platform/errors.js";
import type { FilterTerm } from "../../src/platform/list-query.js";

function rejects(t: ExecutionContext, field: "filter" | "sortOrder", fn: () => unknown, pattern: RegExp): void {
  const error = t.throws(fn, { instanceOf: DomainError });
  if (!error) return;
  t.is(error.kind, "invalid-argument");
  t.is(error.errors.length, 1);
  t.is(error.errors[0].field, field);
  t.regex(error.errors[0].message, pattern);
  t.true(error.message.startsWith(`${field}: `));
}

const rejectsFilter = (t: ExecutionContext, input: string, pattern: RegExp) =>
  rejects(t, "filter", () => parseProductFilter(input), pattern);
const rejectsSort = (t: ExecutionContext, input: string, pattern: RegExp) =>
  rejects(t, "sortOrder", () => parseProductSort(input), pattern);

test("PRODUCT_FIELDS: types and sortable flags", (t) => {
  t.deepEqual(Object.keys(PRODUCT_FIELDS).sort(), [
    "createdAt",
    "description",
    "expirationDate",
    "externalId",
    "isDeleted",
    "isLocked",
    "name",
    "productCode",
    "productVersion",
    "revisionNumber",
    "status",
    "updatedAt",
  ]);
  const sortable = Object.entries(PRODUCT_FIELDS)
    .filter(([, spec]) => spec.sortable)
    .map(([field]) => field)
    .sort();
  t.deepEqual(sortable, [
    "createdAt",
    "expirationDate",
    "externalId",
    "name",
    "productCode",
    "productVersion",
    "revisionNumber",
    "status",
    "updatedAt",
  ]);
  t.is(PRODUCT_FIELDS.status.type, "int");
  t.is(PRODUCT_FIELDS.isLocked.type, "boolean");
  t.is(PRODUCT_FIELDS.expirationDate.type, "date-time");
  t.deepEqual(TEXT_SEARCH_FIELDS, ["productCode", "name", "externalId"]);
});

test("filter: empty or blank input gives no terms", (t) => {
  t.deepEqual(parseProductFilter(""), []);
  t.deepEqual(parseProductFilter("   \t\n "), []);
});

test("filter: string comparisons", (t) => {
  t.deepEqual(parseProductFilter("productCode=PHOTO"), [
    { kind: "compare", field: "productCode", op: "=", value: "PHOTO" },
  ]);
  t.deepEqual(parseProductFilter("name~editor description!=x externalId=ext-1 productVersion=1.2.3"), [
    { kind: "compare", field: "name", op: "~", value: "editor" },
    { kind: "compare", field: "description", op: "!=", value: "x" },
    { kind: "compare", field: "externalId", op: "=", value: "ext-1" },
    { kind: "compare", field: "productVersion", op: "=", value: "1.2.3" },
  ]);
});

test("filter: field names are case-insensitive and returned in camelCase", (t) => {
  t.deepEqual(parseProductFilter("PRODUCTCODE=a productcode=b ProductCode=c isdeleted=true"), [
    { kind: "compare", field: "productCode", op: "=", value: "a" },
    { kind: "compare", field: "productCode", op: "=", value: "b" },
    { kind: "compare", field: "productCode", op: "=", value: "c" },
    { kind: "compare", field: "isDeleted", op: "=", value: true },
  ]);
});

test('filter: quoted values keep spaces and unescape \\" and \\\\', (t) => {
  t.deepEqual(parseProductFilter('name="photo editor"'), [
    { kind: "compare", field: "name", op: "=", value: "photo editor" },
  ]);
  t.deepEqual(parseProductFilter('name~"say \\"hi\\"" externalId="a\\\\b"'), [
    { kind: "compare", field: "name", op: "~", value: 'say "hi"' },
    { kind: "compare", field: "externalId", op: "=", value: "a\\b" },
  ]);
  t.deepEqual(parseProductFilter('name=""'), [{ kind: "compare", field: "name", op: "=", value: "" }]);
  t.deepEqual(parseProductFilter('name="=x"'), [{ kind: "compare", field: "name", op: "=", value: "=x" }]);
});

test("filter: values may contain operator characters after the first", (t) => {
  t.deepEqual(parseProductFilter("externalId=a=b name~x<y"), [
    { kind: "compare", field: "externalId", op: "=", value: "a=b" },
    { kind: "compare", field: "name", op: "~", value: "x<y" },
  ]);
});

test("filter: int comparisons", (t) => {
  t.deepEqual(parseProductFilter("status=2 status!=7 revisionNumber>=3 revisionNumber<10 status>0 status<=5"), [
    { kind: "compare", field: "status", op: "=", value: 2 },
    { kind: "compare", field: "status", op: "!=", value: 7 },
    { kind: "compare", field: "revisionNumber", op: ">=", value: 3 },
    { kind: "compare", field: "revisionNumber", op: "<", value: 10 },
    { kind: "compare", field: "status", op: ">", value: 0 },
    { kind: "compare", field: "status", op: "<=", value: 5 },
  ]);
  t.deepEqual(parseProductFilter('status="3"'), [{ kind: "compare", field: "status", op: "=", value: 3 }]);
  t.deepEqual(parseProductFilter("revisionNumber=2147483647"), [
    { kind: "compare", field: "revisionNumber", op: "=", value: 2_147_483_647 },
  ]);
  const [zero] = parseProductFilter("status=-0");
  t.true(zero.kind === "compare" && Object.is(zero.value, 0));
});

test("filter: boolean comparisons", (t) => {
  t.deepEqual(parseProductFilter("isLocked=true isDeleted!=false isLocked=FALSE isDeleted=True"), [
    { kind: "compare", field: "isLocked", op: "=", value: true },
    { kind: "compare", field: "isDeleted", op: "!=", value: false },
    { kind: "compare", field: "isLocked", op: "=", value: false },
    { kind: "compare", field: "isDeleted", op: "=", value: true },
  ]);
});

test("filter: date-time comparisons", (t) => {
  const value = (input: string) => {
    const [term] = parseProductFilter(input);
    return term.kind === "compare" ? term.value : undefined;
  };
  t.deepEqual(value("createdAt>=2024-05-01"), new Date("2024-05-01T00:00:00.000Z"));
  t.deepEqual(value("updatedAt<2024-05-01T12:30:45Z"), new Date("2024-05-01T12:30:45.000Z"));
  t.deepEqual(value("expirationDate>2024-05-01t12:30:45.123456789z"), new Date("2024-05-01T12:30:45.123Z"));
  t.deepEqual(value("createdAt=2024-05-01T12:30:45.5+02:00"), new Date("2024-05-01T10:30:45.500Z"));
  t.deepEqual(value("createdAt!=2024-05-01T00:00:00-05:30"), new Date("2024-05-01T05:30:00.000Z"));
  t.deepEqual(value('createdAt<="2024-05-01 12:00:00Z"'), new Date("2024-05-01T12:00:00.000Z"));
  t.deepEqual(value("createdAt>2024-02-29"), new Date("2024-02-29T00:00:00.000Z"));
  t.deepEqual(value("createdAt>2000-02-29"), new Date("2000-02-29T00:00:00.000Z"));
  t.is((value("createdAt>0050-01-01") as Date).getUTCFullYear(), 50);
  const [term] = parseProductFilter("CREATEDAT>2024-01-01");
  t.like(term, { kind: "compare", field: "createdAt", op: ">" });
});

test("filter: free-text words and phrases", (t) => {
  t.deepEqual(parseProductFilter('photo "image editor" pro!'), [
    { kind: "text", text: "photo" },
    { kind: "text", text: "image editor" },
    { kind: "text", text: "pro!" },
  ]);
  t.deepEqual(parseProductFilter('"a \\"quoted\\" word"'), [{ kind: "text", text: 'a "quoted" word' }]);
  t.deepEqual(parseProductFilter('"status=2" "x<y"'), [
    { kind: "text", text: "status=2" },
    { kind: "text", text: "x<y" },
  ]);
});

test("filter: comparisons and free text mix, separated by any whitespace", (t) => {
  t.deepEqual(parseProductFilter('  photo\tstatus=2\n"big deal"  isLocked=false  '), [
    { kind: "text", text: "photo" },
    { kind: "compare", field: "status", op: "=", value: 2 },
    { kind: "text", text: "big deal" },
    { kind: "compare", field: "isLocked", op: "=", value: false },
  ] satisfies FilterTerm<ProductField>[]);
});

test("filter: unknown fields", (t) => {
  rejectsFilter(t, "color=red", /unknown field "color" at position 1; filterable fields are productCode, /);
  rejectsFilter(t, "photo product_code=x", /unknown field "product_code" at position 7/);
  rejectsFilter(t, "constructor=x", /unknown field "constructor"/);
  rejectsFilter(t, "__proto__=x", /unknown field "__proto__"/);
  rejectsFilter(t, "toString~x", /unknown field "toString"/);
  rejectsFilter(t, "12>3", /unknown field "12"/);
});

test("filter: operators that do not apply to the field type", (t) => {
  rejectsFilter(
    t,
    "name>b",
    /operator > does not apply to string field name in term "name>b" at position 1; use =, !=, ~/,
  );
  rejectsFilter(t, "productCode<=b", /operator <= does not apply to string field productCode/);
  rejectsFilter(t, "status~2", /operator ~ does not apply to int field status/);
  rejectsFilter(
    t,
    "isLocked>false",
    /operator > does not apply to boolean field isLocked in term "isLocked>false" at position 1; use =, !=$/,
  );
  rejectsFilter(t, "isDeleted~true", /operator ~ does not apply to boolean field isDeleted/);
  rejectsFilter(t, "createdAt~2024", /operator ~ does not apply to date-time field createdAt/);
});

test("filter: bad values", (t) => {
  rejectsFilter(t, "status=8", /status must be an integer from 0 to 7 in term "status=8" at position 1/);
  rejectsFilter(t, "status=-1", /status must be an integer from 0 to 7/);
  rejectsFilter(t, "status=1.5", /status must be an integer/);
  rejectsFilter(t, "status=1e1", /status must be an integer/);
  rejectsFilter(t, "status=0x1", /status must be an integer/);
  rejectsFilter(t, "status=ACTIVE", /status must be an integer/);
  rejectsFilter(t, 'status=""', /status must be an integer/);
  rejectsFilter(t, "revisionNumber=2147483648", /revisionNumber must be an integer from 0 to 2147483647/);
  rejectsFilter(t, "revisionNumber=99999999999999999999", /revisionNumber must be an integer/);
  rejectsFilter(t, "isLocked=yes", /isLocked must be true or false/);
  rejectsFilter(t, "isLocked=1", /isLocked must be true or false/);
  for (const date of [
    "2024-13-01",
    "2024-00-10",
    "2024-02-30",
    "2023-02-29",
    "1900-02-29",
    "2024-04-31",
    "2024-05-01T24:00:00Z",
    "2024-05-01T12:60:00Z",
    "2024-05-01T12:00:60Z",
    "2024-05-01T12:00:00",
    "2024-05-01T12:00Z",
    "2024-05-01T12:00:00+24:00",
    "2024-05-01T12:00:00+02:60",
    "2024-05-01T12:00:00+0200",
    "2024-5-1",
    "20240501",
    "yesterday",
    "1714564800",
  ]) {
    rejectsFilter(t, `createdAt>${date}`, /createdAt must be an RFC 3339 date-time .* or a date/);
  }
});

test("filter: missing values and doubled operators", (t) => {
  rejectsFilter(t, "name=", /missing value in term "name=" at position 1/);
  rejectsFilter(t, "photo status> x", /missing value in term "status>" at position 7/);
  rejectsFilter(t, "name==x", /invalid operator in term "name==x" at position 1/);
  rejectsFilter(t, "createdAt=>2024-01-01", /invalid operator in term/);
  rejectsFilter(t, "status<>3", /invalid operator in term/);
});

test("filter: operators without a field, and operator characters in free text", (t) => {
  rejectsFilter(t, "=x", /missing field name before the operator in term "=x" at position 1/);
  rejectsFilter(t, "a >=3", /missing field name before the operator in term ">=3" at position 3/);
  rejectsFilter(t, "~", /missing field name/);
  rejectsFilter(t, "a!b=c", /invalid comparison in term "a!b=c" at position 1; .*quote free text/);
});

test("filter: quoting errors", (t) => {
  rejectsFilter(t, '"photo editor', /unterminated quote starting at position 1/);
  rejectsFilter(t, 'status=2 name="photo', /unterminated quote starting at position 15/);
  rejectsFilter(t, 'name="photo\\"', /unterminated quote starting at position 6/);
  rejectsFilter(t, 'name="a\\', /unterminated quote/);
  rejectsFilter(t, 'name="a\\nb"', /invalid escape \\n at position 8; only \\" and \\\\ are allowed/);
  rejectsFilter(t, 'name="a"b', /unexpected character at position 9 after a closing quote/);
  rejectsFilter(t, '"a""b"', /unexpected character at position 4 after a closing quote/);
  rejectsFilter(t, 'name=a"b"', /unexpected quote at position 7 in term "name=a\\"b\\""; quote the whole value/);
  rejectsFilter(t, 'pho"to', /unexpected quote at position 4 in term "pho\\"to" at position 1/);
  rejectsFilter(t, '""', /empty quoted phrase at position 1/);
  rejectsFilter(t, 'x "  "', /empty quoted phrase at position 3/);
});

test("filter: limits", (t) => {
  const twenty = Array.from({ length: 20 }, (_, i) => `w${i}`).join(" ");
  t.is(parseProductFilter(twenty).length, 20);
  rejectsFilter(t, `${twenty} w20`, /too many terms: at most 20/);

  t.is(parseProductFilter(`${"a".repeat(256)}`).length, 1);
  t.is(parseProductFilter(`name=${"a".repeat(256)}`).length, 1);
  t.is(parseProductFilter(`name="${"\\\\".repeat(256)}"`).length, 1);
  rejectsFilter(t, "a".repeat(257), /value at position 1 is longer than 256 characters/);
  rejectsFilter(t, `x name=${"a".repeat(257)}`, /value at position 8 is longer than 256 characters/);
  rejectsFilter(t, `"${"a".repeat(257)}"`, /longer than 256 characters/);

  const long = `${"a ".repeat(499)}bb`;
  t.is(long.length, 1000);
  t.throws(() => parseProductFilter(long), { message: /too many terms/ });
  rejectsFilter(t, `${long} `, /too long: 1001 characters, at most 1000/);
  t.deepEqual(parseProductFilter(`${" ".repeat(990)}photo`), [{ kind: "text", text: "photo" }]);
});

test("filter: control characters are rejected", (t) => {
  rejectsFilter(t, "name=a\u0000b", /control character at position 7/);
  rejectsFilter(t, "photo\u001b[31m", /control character at position 6/);
  rejectsFilter(t, "x\u007f", /control character at position 2/);
});

test("filter: injection-looking input parses into harmless strings or clear errors", (t) => {
  t.deepEqual(parseProductFilter("name='; DROP TABLE products; --"), [
    { kind: "compare", field: "name", op: "=", value: "';" },
    { kind: "text", text: "DROP" },
    { kind: "text", text: "TABLE" },
    { kind: "text", text: "products;" },
    { kind: "text", text: "--" },
  ]);
  t.deepEqual(parseProductFilter('name="\'; DROP TABLE products; --"'), [
    { kind: "compare", field: "name", op: "=", value: "'; DROP TABLE products; --" },
  ]);
  t.deepEqual(parseProductFilter("externalId~%_\\"), [
    { kind: "compare", field: "externalId", op: "~", value: "%_\\" },
  ]);
  t.deepEqual(parseProductFilter("' OR 1 --"), [
    { kind: "text", text: "'" },
    { kind: "text", text: "OR" },
    { kind: "text", text: "1" },
    { kind: "text", text: "--" },
  ]);
  rejectsFilter(t, "' OR '1'='1", /unknown field "'1'" at position 6/);
  rejectsFilter(t, "status=1;DROP", /status must be an integer/);
  rejectsFilter(t, "status=1 OR 1=1", /unknown field "1"/);
  rejectsFilter(t, "isDeleted=false--", /isDeleted must be true or false/);
  rejectsFilter(t, "name;DROP=1", /unknown field "name;DROP"/);
  rejectsFilter(t, "name)or(1=1", /unknown field "name\)or\(1"/);
  rejectsFilter(t, "createdAt>2024-01-01'--", /createdAt must be an RFC 3339/);
});

test("sort: empty input gives the default", (t) => {
  t.deepEqual(parseProductSort(""), [{ field: "createdAt", direction: "asc" }]);
  t.deepEqual(parseProductSort("  "), [{ field: "createdAt", direction: "asc" }]);
  const first = parseProductSort("");
  first[0].direction = "desc";
  t.deepEqual(parseProductSort(""), [{ field: "createdAt", direction: "asc" }]);
});

test("sort: keys with signs and directions", (t) => {
  t.deepEqual(parseProductSort("name,-createdAt"), [
    { field: "name", direction: "asc" },
    { field: "createdAt", direction: "desc" },
  ]);
  t.deepEqual(parseProductSort("+status, revisionNumber desc ,productCode ASC,  externalId   Desc"), [
    { field: "status", direction: "asc" },
    { field: "revisionNumber", direction: "desc" },
    { field: "productCode", direction: "asc" },
    { field: "externalId", direction: "desc" },
  ]);
  t.deepEqual(parseProductSort("-UPDATEDAT,expirationdate,productversion desc"), [
    { field: "updatedAt", direction: "desc" },
    { field: "expirationDate", direction: "asc" },
    { field: "productVersion", direction: "desc" },
  ]);
});

test("sort: every sortable field is accepted", (t) => {
  const sortable = Object.entries(PRODUCT_FIELDS)
    .filter(([, spec]) => spec.sortable)
    .map(([field]) => field);
  t.deepEqual(
    parseProductSort(sortable.map((field) => `-${field}`).join(",")).map((key) => key.field),
    sortable,
  );
});

test("sort: unknown and unsortable fields", (t) => {
  rejectsSort(t, "color", /unknown field "color"; sortable fields are productCode, productVersion, name, externalId/);
  rejectsSort(t, "name,-constructor", /unknown field "constructor"/);
  rejectsSort(t, "description", /cannot sort by description; sortable fields are/);
  rejectsSort(t, "-isLocked", /cannot sort by isLocked/);
  rejectsSort(t, "isdeleted desc", /cannot sort by isDeleted/);
});

test("sort: malformed keys", (t) => {
  rejectsSort(t, "name,", /sort key 2 is empty/);
  rejectsSort(t, ",name", /sort key 1 is empty/);
  rejectsSort(t, "name,,status", /sort key 2 is empty/);
  rejectsSort(t, "-", /sort key "-" has no field name/);
  rejectsSort(t, "- name", /sort key "- name" has no field name/);
  rejectsSort(t, "-name desc", /has both a sign and a direction/);
  rejectsSort(t, "+name asc", /has both a sign and a direction/);
  rejectsSort(t, "name up", /invalid direction "up" in sort key "name up"; expected asc or desc/);
  rejectsSort(t, "name asc desc", /invalid sort key "name asc desc"/);
  rejectsSort(t, "--name", /unknown field "-name"/);
  rejectsSort(t, "name; DROP TABLE products", /invalid sort key/);
  rejectsSort(t, "name;--", /unknown field "name;--"/);
  rejectsSort(t, `${"name,".repeat(200)}name`, /too long: 1004 characters, at most 1000/);
});

test("sort: duplicate fields", (t) => {
  rejectsSort(t, "name,-name", /field name appears more than once/);
  rejectsSort(t, "createdAt,status,CREATEDAT desc", /field createdAt appears more than once/);
});
