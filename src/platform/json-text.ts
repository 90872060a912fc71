/** Characters JSON.stringify escapes, and surrogates, which it escapes when unpaired. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON must escape
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * JSON.stringify of a string, exactly: only quotes, backslashes, control characters and surrogates need its
 * work, and testing for them costs a fraction of it.
 */
export function jsonText(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}
