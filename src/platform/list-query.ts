// The `filter` and `sortOrder` language of list operations (ListProducts, ListEntitlements): a parser per list's
// fields, and the SQL of what it parses.
import { type DomainError, invalidField } from "./errors.js";

export type QueryFieldType = "string" | "int" | "boolean" | "date-time";

export interface QueryFieldSpec {
  type: QueryFieldType;
  sortable: boolean;
  /** Inclusive bounds of an int field. */
  min?: number;
  max?: number;
}

export type FilterOp = "=" | "!=" | "<" | "<=" | ">" | ">=" | "~";

/** `~` is a case-insensitive contains; a text term is a case-insensitive contains on the free-text fields. */
export type FilterTerm<Field extends string> =
  | { kind: "compare"; field: Field; op: FilterOp; value: string | number | boolean | Date }
  | { kind: "text"; text: string };

export interface SortKey<Field extends string> {
  field: Field;
  direction: "asc" | "desc";
}

/** The `filter` and `sortOrder` parsers of one list's fields. */
export interface QueryLanguage<Field extends string> {
  /** Whitespace-separated terms that must all hold. Blank input gives []. */
  parseFilter(input: string): FilterTerm<Field>[];
  /** `name,-createdAt`, `+status`, `name desc`. Blank input sorts by the default field, ascending. */
  parseSort(input: string): SortKey<Field>[];
}

const MAX_FILTER_LENGTH = 1000;
const MAX_TERMS = 20;
const MAX_VALUE_LENGTH = 256;
const MAX_SORT_LENGTH = 1000;

const OPS_BY_TYPE: Record<QueryFieldType, readonly FilterOp[]> = {
  string: ["=", "!=", "~"],
  int: ["=", "!=", "<", "<=", ">", ">="],
  boolean: ["=", "!="],
  "date-time": ["=", "!=", "<", "<=", ">", ">="],
};

/** One list's fields, as the parsers look them up. */
interface Vocabulary<Field extends string> {
  specs: Record<Field, QueryFieldSpec>;
  all: Field[];
  sortable: Field[];
  /** A Map, so that names such as `constructor` or `__proto__` are unknown rather than inherited. */
  byLowerName: Map<string, Field>;
}

/** The query language over `fields` (filterable all, sortable those marked), sorting by `defaultSort` when blank. */
export function queryLanguage<Field extends string>(
  fields: Record<Field, QueryFieldSpec>,
  defaultSort: Field,
): QueryLanguage<Field> {
  const all = Object.keys(fields) as Field[];
  const vocabulary: Vocabulary<Field> = {
    specs: fields,
    all,
    sortable: all.filter((field) => fields[field].sortable),
    byLowerName: new Map(all.map((field) => [field.toLowerCase(), field])),
  };
  return {
    parseFilter: (input) => parseFilter(vocabulary, input),
    parseSort: (input) => parseSort(vocabulary, input, defaultSort),
  };
}

/** A field name directly followed by an operator; the name is checked against the list's fields afterwards. */
const COMPARISON = /([^\s"=<>!~]+)(!=|<=|>=|=|<|>|~)/y;
const OPERATOR_CHARS = "=<>!~";

function parseFilter<Field extends string>(vocabulary: Vocabulary<Field>, input: string): FilterTerm<Field>[] {
  if (input.length > MAX_FILTER_LENGTH) {
    throw filterError(`too long: ${input.length} characters, at most ${MAX_FILTER_LENGTH} are allowed`);
  }
  const control = findControlCharacter(input);
  if (control >= 0) throw filterError(`control character at position ${control + 1}`);

  const terms: FilterTerm<Field>[] = [];
  let pos = skipWhitespace(input, 0);
  while (pos < input.length) {
    if (terms.length === MAX_TERMS) throw filterError(`too many terms: at most ${MAX_TERMS} are allowed`);
    const { term, end } = parseTerm(vocabulary, input, pos);
    terms.push(term);
    pos = skipWhitespace(input, end);
  }
  return terms;
}

function parseSort<Field extends string>(
  vocabulary: Vocabulary<Field>,
  input: string,
  defaultSort: Field,
): SortKey<Field>[] {
  if (input.trim() === "") return [{ field: defaultSort, direction: "asc" }];
  if (input.length > MAX_SORT_LENGTH) {
    throw sortError(`too long: ${input.length} characters, at most ${MAX_SORT_LENGTH} are allowed`);
  }
  const keys: SortKey<Field>[] = [];
  for (const [index, rawKey] of input.split(",").entries()) {
    const key = parseSortKey(vocabulary, rawKey.trim(), index);
    if (keys.some((existing) => existing.field === key.field)) {
      throw sortError(`field ${key.field} appears more than once`);
    }
    keys.push(key);
  }
  return keys;
}

function parseSortKey<Field extends string>(
  vocabulary: Vocabulary<Field>,
  text: string,
  index: number,
): SortKey<Field> {
  if (text === "") throw sortError(`sort key ${index + 1} is empty`);
  const quoted = JSON.stringify(text);
  const parts = text.split(/\s+/);
  if (parts.length > 2) throw sortError(`invalid sort key ${quoted}; expected "field", "-field" or "field asc|desc"`);

  let name = parts[0];
  let direction: SortKey<Field>["direction"] = "asc";
  const sign = name[0];
  if (sign === "-" || sign === "+") {
    name = name.slice(1);
    direction = sign === "-" ? "desc" : "asc";
  }
  if (name === "") throw sortError(`sort key ${quoted} has no field name`);
  if (parts.length === 2) {
    if (sign === "-" || sign === "+") {
      throw sortError(`sort key ${quoted} has both a sign and a direction; use one of them`);
    }
    const word = parts[1].toLowerCase();
    if (word !== "asc" && word !== "desc") {
      throw sortError(`invalid direction ${JSON.stringify(parts[1])} in sort key ${quoted}; expected asc or desc`);
    }
    direction = word;
  }

  const field = vocabulary.byLowerName.get(name.toLowerCase());
  const sortable = vocabulary.sortable.join(", ");
  if (field === undefined) {
    throw sortError(`unknown field ${JSON.stringify(name)}; sortable fields are ${sortable}`);
  }
  if (!vocabulary.specs[field].sortable) {
    throw sortError(`cannot sort by ${field}; sortable fields are ${sortable}`);
  }
  return { field, direction };
}

function parseTerm<Field extends string>(
  vocabulary: Vocabulary<Field>,
  input: string,
  start: number,
): { term: FilterTerm<Field>; end: number } {
  if (input[start] === '"') {
    const { value, end } = readQuoted(input, start);
    expectTermEnd(input, end);
    if (value.trim() === "") throw filterError(`empty quoted phrase at position ${start + 1}`);
    checkValueLength(value, start);
    return { term: { kind: "text", text: value }, end };
  }

  COMPARISON.lastIndex = start;
  const comparison = COMPARISON.exec(input);
  if (comparison) return parseComparison(vocabulary, input, start, comparison[1], comparison[2] as FilterOp);

  const end = bareEnd(input, start);
  const word = input.slice(start, end);
  const where = `in term ${JSON.stringify(word)} at position ${start + 1}`;
  const quote = word.indexOf('"');
  if (quote >= 0) {
    throw filterError(`unexpected quote at position ${start + quote + 1} ${where}; quote whole values or phrases`);
  }
  if (OPERATOR_CHARS.includes(word[0])) throw filterError(`missing field name before the operator ${where}`);
  if (/[=<>~]/.test(word)) {
    throw filterError(
      `invalid comparison ${where}; expected field<op>value with op one of =, !=, <, <=, >, >=, ~ ` +
        "(quote free text that contains these characters)",
    );
  }
  checkValueLength(word, start);
  return { term: { kind: "text", text: word }, end };
}

function parseComparison<Field extends string>(
  vocabulary: Vocabulary<Field>,
  input: string,
  start: number,
  rawField: string,
  op: FilterOp,
): { term: FilterTerm<Field>; end: number } {
  const field = vocabulary.byLowerName.get(rawField.toLowerCase());
  if (field === undefined) {
    throw filterError(
      `unknown field ${JSON.stringify(rawField)} at position ${start + 1}; filterable fields are ${vocabulary.all.join(", ")}`,
    );
  }

  const valueStart = start + rawField.length + op.length;
  let raw: string;
  let end: number;
  if (input[valueStart] === '"') {
    ({ value: raw, end } = readQuoted(input, valueStart));
    expectTermEnd(input, end);
  } else {
    end = bareEnd(input, valueStart);
    raw = input.slice(valueStart, end);
    const termText = JSON.stringify(input.slice(start, end));
    if (raw === "") throw filterError(`missing value in term ${termText} at position ${start + 1}`);
    const quote = raw.indexOf('"');
    if (quote >= 0) {
      throw filterError(
        `unexpected quote at position ${valueStart + quote + 1} in term ${termText}; quote the whole value`,
      );
    }
    if (OPERATOR_CHARS.includes(raw[0])) {
      throw filterError(
        `invalid operator in term ${termText} at position ${start + 1}; expected one of =, !=, <, <=, >, >=, ~ ` +
          "(quote a value that starts with one of =<>!~)",
      );
    }
  }
  checkValueLength(raw, valueStart);

  const spec: QueryFieldSpec = vocabulary.specs[field];
  const where = `in term ${JSON.stringify(input.slice(start, end))} at position ${start + 1}`;
  const allowed = OPS_BY_TYPE[spec.type];
  if (!allowed.includes(op)) {
    throw filterError(
      `operator ${op} does not apply to ${spec.type} field ${field} ${where}; use ${allowed.join(", ")}`,
    );
  }
  const value = convertValue(spec, raw);
  if (value === undefined) throw filterError(`${field} must be ${describeType(spec)} ${where}`);
  return { term: { kind: "compare", field, op, value }, end };
}

function convertValue(spec: QueryFieldSpec, raw: string): string | number | boolean | Date | undefined {
  switch (spec.type) {
    case "string":
      return raw;
    case "int": {
      if (!/^-?\d{1,10}$/.test(raw)) return undefined;
      // `+ 0` turns "-0" into 0.
      const number = Number(raw) + 0;
      return number >= (spec.min ?? -Infinity) && number <= (spec.max ?? Infinity) ? number : undefined;
    }
    case "boolean": {
      const lower = raw.toLowerCase();
      return lower === "true" ? true : lower === "false" ? false : undefined;
    }
    case "date-time":
      return parseDateTime(raw);
  }
}

function describeType(spec: QueryFieldSpec): string {
  switch (spec.type) {
    case "string":
      return "a string";
    case "int":
      return `an integer from ${spec.min} to ${spec.max}`;
    case "boolean":
      return "true or false";
    case "date-time":
      return "an RFC 3339 date-time (2024-05-01T12:00:00Z) or a date (2024-05-01)";
  }
}

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2})))?$/;

/** An RFC 3339 date-time, or a full date meaning midnight UTC; fractions beyond milliseconds are truncated. */
function parseDateTime(text: string): Date | undefined {
  const match = DATE_TIME.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map((part) => Number(part ?? "0"));
  const [fraction, zulu, offsetSign, offsetHour, offsetMinute] = match.slice(7);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  if (zulu === undefined && offsetSign !== undefined && (Number(offsetHour) > 23 || Number(offsetMinute) > 59)) {
    return undefined;
  }

  // setUTCFullYear, unlike Date.UTC, does not move years 0-99 to the 1900s.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number((fraction ?? "").padEnd(3, "0").slice(0, 3)));
  if (offsetSign === undefined) return date;
  const offsetMinutes = (Number(offsetHour) * 60 + Number(offsetMinute)) * (offsetSign === "-" ? -1 : 1);
  return new Date(date.getTime() - offsetMinutes * 60_000);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Reads a double-quoted string starting at `start`, with the escapes \" and \\. */
function readQuoted(input: string, start: number): { value: string; end: number } {
  let value = "";
  let pos = start + 1;
  while (pos < input.length) {
    const char = input[pos];
    if (char === '"') return { value, end: pos + 1 };
    if (char === "\\") {
      const next = input[pos + 1];
      if (next === undefined) break;
      if (next !== '"' && next !== "\\") {
        throw filterError(`invalid escape \\${next} at position ${pos + 1}; only \\" and \\\\ are allowed`);
      }
      value += next;
      pos += 2;
    } else {
      value += char;
      pos += 1;
    }
  }
  throw filterError(`unterminated quote starting at position ${start + 1}`);
}

function expectTermEnd(input: string, end: number): void {
  if (end < input.length && !isWhitespace(input[end])) {
    throw filterError(`unexpected character at position ${end + 1} after a closing quote; expected a space`);
  }
}

function checkValueLength(value: string, start: number): void {
  if (value.length > MAX_VALUE_LENGTH) {
    throw filterError(`value at position ${start + 1} is longer than ${MAX_VALUE_LENGTH} characters`);
  }
}

function bareEnd(input: string, start: number): number {
  let pos = start;
  while (pos < input.length && !isWhitespace(input[pos])) pos += 1;
  return pos;
}

function skipWhitespace(input: string, start: number): number {
  let pos = start;
  while (pos < input.length && isWhitespace(input[pos])) pos += 1;
  return pos;
}

function isWhitespace(char: string): boolean {
  return /\s/.test(char);
}

/** The index of the first control character other than tab, line feed, vertical tab, form feed or carriage return. */
function findControlCharacter(input: string): number {
  for (let i = 0; i < input.length; i += 1) {
    const code = input.charCodeAt(i);
    if (code < 0x09 || (code > 0x0d && code < 0x20) || code === 0x7f) return i;
  }
  return -1;
}

function filterError(message: string): DomainError {
  return invalidField("filter", message);
}

function sortError(message: string): DomainError {
  return invalidField("sortOrder", message);
}

/** The table side of one list: the column of each field, and the columns a free-text term is matched against. */
export interface ListColumns<Field extends string> {
  columns: Record<Field, string>;
  textColumns: readonly string[];
}

/**
 * The WHERE clauses of a filter (every term must hold), with their parameters; `storedValue` converts a compared
 * value as the driver stores it in the field's column.
 */
export function filterClauses<Field extends string>(
  list: ListColumns<Field>,
  terms: FilterTerm<Field>[],
  storedValue: (field: Field, value: unknown) => unknown,
): { clauses: string[]; parameters: unknown[] } {
  const clauses: string[] = [];
  const parameters: unknown[] = [];
  for (const term of terms) {
    if (term.kind === "text") {
      const pattern = containsPattern(term.text);
      clauses.push(`(${list.textColumns.map((column) => `LOWER(${column}) LIKE ? ESCAPE '!'`).join(" OR ")})`);
      parameters.push(...list.textColumns.map(() => pattern));
      continue;
    }
    const column = list.columns[term.field];
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
export function orderSql<Field extends string>(columns: Record<Field, string>, sort: SortKey<Field>[]): string {
  return sort
    .map((key) => `${columns[key.field]} ${key.direction === "desc" ? "DESC" : "ASC"}`)
    .concat("id ASC")
    .join(", ");
}

/** A case-insensitive LIKE pattern containing `text`, with `!` escaping LIKE's wildcards. */
function containsPattern(text: string): string {
  return `%${text.toLowerCase().replace(/[!%_]/g, (character) => `!${character}`)}%`;
}
