import type { JsonValue } from "@bufbuild/protobuf";
import { isInteger, parse } from "lossless-json";

/** A run of digits long enough that JSON.parse might round it; 15 digits are always exact. */
const MAYBE_UNSAFE_INTEGER = /\d{16,}/;

/**
 * JSON.parse, except that integer literals too large to be exact as a JavaScript number come back as strings
 * holding their digits, which protobuf JSON accepts for 64-bit integer fields. Other numbers become numbers
 * (`1e400` is Infinity, which the codec refuses), a later duplicate key wins and `__proto__` is an ordinary
 * key, as with JSON.parse. Throws SyntaxError on malformed JSON.
 */
export function parseJsonExactIntegers(text: string): JsonValue {
  // Most bodies hold no long digit run at all: JSON.parse is exact for them and many times faster.
  if (!MAYBE_UNSAFE_INTEGER.test(text)) return JSON.parse(text) as JsonValue;
  return parse(text, null, { parseNumber: exactNumber, onDuplicateKey: ({ newValue }) => newValue }) as JsonValue;
}

function exactNumber(literal: string): number | string {
  const value = Number(literal);
  return isInteger(literal) && !Number.isSafeInteger(value) ? literal : value;
}
