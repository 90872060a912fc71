import { randomBytes } from "node:crypto";

/**
 * Crockford's base32 alphabet: digits and upper-case letters without I, L, O and U, so that no two symbols
 * look alike (I/L/1, O/0) and no accidental word is spelled. 32 symbols: 5 bits each.
 */
export const CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** 20 symbols of 5 bits: 100 bits of entropy. */
export const GENERATED_CODE_SYMBOLS = 20;
const GROUP_SIZE = 5;

/** A vendor-chosen code holds 4 to 64 characters: letters, digits and the separators `-`, `_` and space. */
export const VENDOR_CODE_MIN_LENGTH = 4;
export const VENDOR_CODE_MAX_LENGTH = 64;
const VENDOR_CODE_CHARACTERS = /^[A-Za-z0-9 _-]+$/;

const SEPARATORS = /[\s_-]+/g;
/** Crockford decoding: the letters read as digits. */
const LOOKALIKES: Record<string, string> = { O: "0", I: "1", L: "1" };

/**
 * A new code, `XXXXX-XXXXX-XXXXX-XXXXX`. Each symbol takes the low 5 bits of one random byte: 256 is a
 * multiple of 32, so every symbol is equally likely (no modulo bias).
 */
export function generateActivationCode(random: (size: number) => Uint8Array = randomBytes): string {
  const bytes = random(GENERATED_CODE_SYMBOLS);
  let symbols = "";
  for (let index = 0; index < GENERATED_CODE_SYMBOLS; index++) symbols += CODE_ALPHABET[bytes[index] & 0x1f];
  const groups: string[] = [];
  for (let start = 0; start < symbols.length; start += GROUP_SIZE)
    groups.push(symbols.slice(start, start + GROUP_SIZE));
  return groups.join("-");
}

/**
 * The form a code is stored under and looked up by: separators (dashes, underscores, white space) dropped,
 * ASCII letters upper-cased, and Crockford's lookalikes read as the digits they resemble (O → 0, I and L → 1).
 * So `abcde-fghjk`, `ABCDEFGHJK` and `ABCDE FGHJK` are one code, and a typed O for a zero still matches.
 */
export function codeKey(code: string): string {
  return code
    .replace(SEPARATORS, "")
    .replace(/[a-z]/g, (letter) => letter.toUpperCase())
    .replace(/[OIL]/g, (letter) => LOOKALIKES[letter]);
}

/** Why `code` (trimmed) cannot be a vendor-chosen code, or null when it can. */
export function vendorCodeProblem(code: string): string | null {
  if (code === "") return 'is blank: leave it out (or send "") to have a code generated';
  if (code.length > VENDOR_CODE_MAX_LENGTH) return `must be at most ${VENDOR_CODE_MAX_LENGTH} characters`;
  if (!VENDOR_CODE_CHARACTERS.test(code)) return "may hold only letters A-Z, digits, '-', '_' and spaces";
  if (codeKey(code).length < VENDOR_CODE_MIN_LENGTH) {
    return `must hold at least ${VENDOR_CODE_MIN_LENGTH} letters or digits`;
  }
  return null;
}

/**
 * The key of a code presented for activation, or null when it cannot be any issued code (wrong characters
 * or length): the caller answers bad request without a lookup.
 */
export function presentedCodeKey(code: string): string | null {
  const trimmed = code.trim();
  return vendorCodeProblem(trimmed) === null ? codeKey(trimmed) : null;
}
