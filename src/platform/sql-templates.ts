import { setNewest } from "./bounded-map.js";

/** What SqlTemplates uses of mysql2's escaper (`format`, `escape` and `raw` of the module TypeORM loaded). */
export interface SqlEscaper {
  format(sql: string, values: unknown[], stringifyObjects?: boolean, timezone?: string): string;
  escape(value: unknown, stringifyObjects?: boolean, timezone?: string): string;
  raw(sql: string): unknown;
}

/** Stands for a placeholder while a text is split; a text holding it is left to mysql2's format. */
const MARKER = "\u0000";
/** At most 256 texts of up to 16 K characters are kept, with their parts: about 8 MiB at worst. */
const TEXTS_KEPT = 256;
const LONGEST_TEXT_KEPT = 16 * 1024;
/** mysql2's default, which the data source leaves as it is. */
const STRINGIFY_OBJECTS = false;

/**
 * Writes values into SQL text exactly as mysql2's format does (its own escaping, value by value), but finds a
 * text's placeholders once per distinct text instead of on every query: mysql2 scans the whole text, quotes and
 * comments included, each time, which cost an activation's batched statements more than escaping their values.
 * A text that mysql2 reads specially (`??` identifiers), is longer than the texts kept (a large multi-row INSERT
 * is formatted once anyway) or whose values do not match its placeholders one for one, and values that mysql2
 * expands by context (plain objects, Maps), are left to mysql2's format.
 */
export class SqlTemplates {
  /** Each text's parts between its placeholders; null for a text left to mysql2. */
  private readonly parts = new Map<string, readonly string[] | null>();

  constructor(private readonly escaper: SqlEscaper) {}

  /** mysql2's `queryFormat`: the text with `values` written in. */
  format(sql: string, values: unknown, timezone: string): string {
    if (!Array.isArray(values)) return this.escaper.format(sql, values as unknown[], STRINGIFY_OBJECTS, timezone);
    if (values.length === 0) return sql;
    const parts = this.partsOf(sql);
    if (!parts || parts.length !== values.length + 1 || !values.every(escapedAlike)) {
      return this.escaper.format(sql, values, STRINGIFY_OBJECTS, timezone);
    }
    let text = parts[0];
    for (let index = 0; index < values.length; index++) {
      text += this.escaped(values[index], timezone) + parts[index + 1];
    }
    return text;
  }

  private escaped(value: unknown, timezone: string): string {
    if (typeof value === "number" || typeof value === "bigint") return `${value}`;
    return this.escaper.escape(value, STRINGIFY_OBJECTS, timezone);
  }

  private partsOf(sql: string): readonly string[] | null {
    const known = this.parts.get(sql);
    if (known !== undefined) return known;
    if (sql.length > LONGEST_TEXT_KEPT) return null;
    const parts = sql.includes("??") || sql.includes(MARKER) ? null : this.split(sql);
    setNewest(this.parts, sql, parts, TEXTS_KEPT);
    return parts;
  }

  /** mysql2 itself finds the placeholders: each is written as the marker, and the text split on it. */
  private split(sql: string): readonly string[] {
    const marker = this.escaper.raw(MARKER);
    let questionMarks = 0;
    for (let index = sql.indexOf("?"); index !== -1; index = sql.indexOf("?", index + 1)) questionMarks++;
    return this.escaper.format(sql, new Array(questionMarks).fill(marker)).split(MARKER);
  }
}

/**
 * Values mysql2's format escapes as `escape` does wherever they stand: all but plain objects, Maps and other
 * objects it may expand into `column = value` lists.
 */
function escapedAlike(value: unknown): boolean {
  return (
    value === null ||
    typeof value !== "object" ||
    value instanceof Date ||
    Array.isArray(value) ||
    value instanceof Uint8Array
  );
}
