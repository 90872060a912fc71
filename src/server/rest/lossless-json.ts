import type { JsonValue } from "@bufbuild/protobuf";

/** Integers that may lie past 2^53, where JSON.parse would round them; 15 digits are always exact. */
const UNSAFE_INTEGER = /^-?\d{16,}$/;
const UNSAFE_INTEGER_ANYWHERE = /\d{16,}/;

/**
 * JSON.parse, except that integer literals too long to be exact as a JavaScript number come back as strings
 * holding their digits, which protobuf JSON accepts for 64-bit integer fields. Other numbers and all strings
 * are left as they are. Throws SyntaxError on malformed JSON, as JSON.parse does.
 */
export function parseJsonExactIntegers(text: string): JsonValue {
  const parsed = JSON.parse(text) as JsonValue;
  return UNSAFE_INTEGER_ANYWHERE.test(text) ? JSON.parse(quoteUnsafeIntegers(text)) : parsed;
}

function quoteUnsafeIntegers(text: string): string {
  let out = "";
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (char === '"') {
      const end = stringEnd(text, index);
      out += text.slice(index, end);
      index = end;
    } else if (char === "-" || (char >= "0" && char <= "9")) {
      const match = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(index));
      const literal = match ? match[0] : char;
      const unsafe = UNSAFE_INTEGER.test(literal) && !Number.isSafeInteger(Number(literal));
      out += unsafe ? `"${literal}"` : literal;
      index += literal.length;
    } else {
      out += char;
      index++;
    }
  }
  return out;
}

/** The index just past the string literal that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let index = start + 1;
  while (index < text.length && text[index] !== '"') index += text[index] === "\\" ? 2 : 1;
  return index + 1;
}
