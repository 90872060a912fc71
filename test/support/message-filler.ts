import {
  create,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonValue,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";

/** Strings that need JSON escapes, or look like they might. */
const STRINGS = [
  "",
  "plain",
  "unicode ✓ 日本語 é",
  "emoji 🎉",
  'quote " only',
  "backslash \\ only",
  "slash / </script>",
  "nul \u0000",
  "unit separator \u001f",
  "controls \u0001\u0007\b\f\n\r\t\u007f",
  "lone surrogates \ud800 \udfff",
  "separators \u2028\u2029",
];
const INT32 = [0, 1, -1, 42, 2147483647, -2147483648];
const UINT32 = [0, 1, 4294967295];
const INT64 = [0n, -1n, 9007199254740993n, 9223372036854775807n, -9223372036854775808n];
const UINT64 = [0n, 1n, 18446744073709551615n];
const DOUBLES = [0, -0, 1.5, -2.25, 0.1 + 0.2, 1e21, 1e-7, 123456789.125, Number.MAX_VALUE, Number.MIN_VALUE];
const SPECIAL_DOUBLES = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
const BYTES = [new Uint8Array(0), Uint8Array.of(0, 255, 1, 2, 3), new TextEncoder().encode("hello, world?>")];
const MAP_KEYS: Partial<Record<ScalarType, string[]>> = {
  [ScalarType.STRING]: ["", "color", "10", "2", "1", "ключ 🔑", 'quo"te\n', "constructor"],
  [ScalarType.BOOL]: ["true", "false"],
  [ScalarType.INT64]: ["0", "-1", "9223372036854775807", "-9223372036854775808", "007"],
  [ScalarType.UINT64]: ["0", "18446744073709551615", "0012"],
};
/** Keys in other forms than toJson writes them ("010", "0x1f") included. */
const INT32_KEYS = ["0", "-1", "7", "2147483647", "-2147483648", "010", "0x1f"];
/** [seconds, nanos]: zero, sub-tick, negative below a second, fractions, days, the range's ends. */
const DURATIONS: [bigint, number][] = [
  [0n, 0],
  [1n, 0],
  [59n, 100],
  [0n, 50],
  [0n, -1],
  [0n, -500_000_000],
  [-1n, -500_000_000],
  [-86_400n, 0],
  [93_784n, 500_000_000],
  [3_600n, 1_000_000],
  [315_576_000_000n, 999_999_999],
  [-315_576_000_000n, -999_999_999],
];
/** [seconds, nanos]: the epoch, the range's ends, each fraction length, a leap day, before the epoch. */
const TIMESTAMPS: [bigint, number][] = [
  [0n, 0],
  [-62_135_596_800n, 0],
  [253_402_300_799n, 999_999_999],
  [1_780_000_000n, 1_000_000],
  [1_780_000_000n, 1_000],
  [1_780_000_000n, 1],
  [1_780_000_000n, 123_456_789],
  [951_782_400n, 0],
  [-1n, 0],
];
const JSON_VALUES: JsonValue[] = [
  null,
  0,
  -1.5,
  "text \u0000 ✓",
  true,
  [],
  {},
  [1, "two", null, { deep: [false] }],
  { a: { b: "c" } },
];

/** Builds messages of any type with values picked (reproducibly, from a seed) among edge cases. */
export class MessageFiller {
  private state: number;

  constructor(
    seed: number,
    private readonly maxDepth = 3,
  ) {
    this.state = seed + 1;
  }

  message(schema: DescMessage, depth = 0): Message {
    const wellKnown = this.wellKnown(schema);
    if (wellKnown) return wellKnown;
    const message = create(schema) as unknown as Record<string, unknown>;
    for (const oneof of schema.oneofs) {
      if (this.chance(0.25)) continue;
      const field = this.pick(oneof.fields);
      const value = this.singular(field, depth);
      if (value !== undefined) message[oneof.localName] = { case: field.localName, value };
    }
    for (const field of schema.fields) {
      if (field.oneof || this.chance(0.15)) continue;
      const value = this.field(field, depth);
      if (value !== undefined) message[field.localName] = value;
    }
    return message as unknown as Message;
  }

  /** A number in [0, 1): mulberry32. */
  private random(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  private chance(probability: number): boolean {
    return this.random() < probability;
  }

  private pick<T>(pool: readonly T[]): T {
    return pool[Math.floor(this.random() * pool.length)];
  }

  private field(field: DescField, depth: number): unknown {
    if (field.fieldKind === "list") {
      const length = field.listKind === "message" && depth >= this.maxDepth ? 0 : this.pick([0, 1, 2, 3]);
      return Array.from({ length }, () => this.element(field, depth));
    }
    if (field.fieldKind === "map") {
      if (field.mapKind === "message" && depth >= this.maxDepth) return {};
      const map: Record<string, unknown> = {};
      const keys = MAP_KEYS[field.mapKey] ?? INT32_KEYS;
      for (let count = this.pick([0, 1, 3]); count > 0; count--) map[this.pick(keys)] = this.element(field, depth);
      return map;
    }
    return this.singular(field, depth);
  }

  private element(field: DescField & { fieldKind: "list" | "map" }, depth: number): unknown {
    if (field.message) return this.messageValue(field.message, depth);
    if (field.enum) return this.enumValue(field.enum.values.map((value) => value.number));
    return this.scalar(field.scalar as ScalarType, (field as { longAsString?: boolean }).longAsString);
  }

  private singular(field: DescField, depth: number): unknown {
    if (field.fieldKind === "message") {
      const value = field.message.fields[0];
      // protobuf-es holds a wrapper in a singular field as its bare value.
      if (!field.oneof && isWrapperDesc(field.message) && value.fieldKind === "scalar")
        return this.scalar(value.scalar);
      return depth >= this.maxDepth ? undefined : this.messageValue(field.message, depth);
    }
    if (field.fieldKind === "enum") return this.enumValue(field.enum.values.map((value) => value.number));
    if (field.fieldKind === "scalar") return this.scalar(field.scalar, field.longAsString);
    return undefined;
  }

  /** A message as a field holds it: protobuf-es holds a Struct as a plain JSON object. */
  private messageValue(schema: DescMessage, depth: number): unknown {
    if (schema.typeName === "google.protobuf.Struct")
      return { text: this.pick(JSON_VALUES), list: this.pick(JSON_VALUES) };
    return this.message(schema, depth + 1);
  }

  private enumValue(numbers: number[]): number {
    return this.pick([...numbers, 99, -3]);
  }

  scalar(type: ScalarType, longAsString = false): unknown {
    switch (type) {
      case ScalarType.STRING:
        return this.pick(STRINGS);
      case ScalarType.BOOL:
        return this.chance(0.5);
      case ScalarType.BYTES:
        return this.pick(BYTES);
      case ScalarType.DOUBLE:
        return this.pick(this.chance(0.2) ? SPECIAL_DOUBLES : DOUBLES);
      case ScalarType.FLOAT:
        return Math.fround(this.pick(this.chance(0.2) ? SPECIAL_DOUBLES : DOUBLES));
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return this.pick(UINT32);
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64: {
        const value = this.pick(INT64);
        return longAsString ? String(value) : value;
      }
      case ScalarType.UINT64:
      case ScalarType.FIXED64: {
        const value = this.pick(UINT64);
        return longAsString ? String(value) : value;
      }
      default:
        return this.pick(INT32);
    }
  }

  private wellKnown(schema: DescMessage): Message | undefined {
    switch (schema.typeName) {
      case "google.protobuf.Duration":
      case "google.protobuf.Timestamp": {
        const [seconds, nanos] = this.pick(schema.typeName.endsWith("Duration") ? DURATIONS : TIMESTAMPS);
        return create(schema, { seconds, nanos } as never);
      }
      case "google.protobuf.Struct":
        return fromJson(schema, { text: this.pick(JSON_VALUES), list: this.pick(JSON_VALUES) });
      case "google.protobuf.Value":
        return fromJson(schema, this.pick(JSON_VALUES));
      case "google.protobuf.ListValue":
        return fromJson(schema, [this.pick(JSON_VALUES), this.pick(JSON_VALUES)]);
      case "google.protobuf.FieldMask":
        return create(schema, { paths: this.pick([[], ["display_name"], ["a", "b_c.d_e"]]) } as never);
    }
    if (!schema.typeName.startsWith("google.protobuf.")) return undefined;
    const value = schema.fields[0];
    if (value?.fieldKind !== "scalar") return create(schema);
    return create(schema, { value: this.scalar(value.scalar) } as never);
  }
}
