import test from "ava";
import {
  CODE_ALPHABET,
  codeKey,
  GENERATED_CODE_SYMBOLS,
  generateActivationCode,
  presentedCodeKey,
  vendorCodeProblem,
} from "../../src/licensing/activation-code-format.js";

const GENERATED = /^[0-9A-HJKMNP-TV-Z]{5}(-[0-9A-HJKMNP-TV-Z]{5}){3}$/;

test("the alphabet is Crockford's base32: 32 distinct symbols, digits and letters without I, L, O and U", (t) => {
  t.is(CODE_ALPHABET.length, 32);
  t.is(new Set(CODE_ALPHABET).size, 32);
  const expected = [..."0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"].filter((c) => !"ILOU".includes(c)).join("");
  t.is(CODE_ALPHABET, expected);
});

test("a generated code is 20 symbols (100 bits) in four dash-separated groups of five", (t) => {
  const code = generateActivationCode();
  t.regex(code, GENERATED);
  t.is(codeKey(code).length, GENERATED_CODE_SYMBOLS);
  t.is(GENERATED_CODE_SYMBOLS * Math.log2(CODE_ALPHABET.length), 100);
});

test("each symbol is the low 5 bits of one byte of the entropy source, asked for 20 bytes", (t) => {
  const sizes: number[] = [];
  const bytes = Uint8Array.from({ length: 20 }, (_, index) => index * 8 + 1);
  const code = generateActivationCode((size) => {
    sizes.push(size);
    return bytes;
  });
  t.deepEqual(sizes, [20]);
  const expected = [...bytes].map((byte) => CODE_ALPHABET[byte % 32]).join("");
  t.is(codeKey(code), expected);
  t.is(
    generateActivationCode(() => new Uint8Array(20)),
    "00000-00000-00000-00000",
  );
  t.is(
    generateActivationCode(() => new Uint8Array(20).fill(0xff)),
    "ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ",
  );
  t.is(
    generateActivationCode(() => new Uint8Array(20).fill(0x20)),
    "00000-00000-00000-00000",
  );
});

test("10,000 generated codes are all distinct, never hold an ambiguous character, and use every symbol evenly", (t) => {
  const codes = Array.from({ length: 10_000 }, () => generateActivationCode());
  t.is(new Set(codes).size, codes.length);
  t.true(codes.every((code) => GENERATED.test(code)));
  t.false(codes.some((code) => /[ILOU]/.test(code)));
  const counts = new Map<string, number>();
  for (const code of codes) for (const symbol of codeKey(code)) counts.set(symbol, (counts.get(symbol) ?? 0) + 1);
  t.is(counts.size, 32);
  // Chi-squared over 200,000 symbols, 31 degrees of freedom: above 90 happens with odds far below one in a million.
  const expected = (codes.length * GENERATED_CODE_SYMBOLS) / 32;
  const chiSquared = [...counts.values()].reduce((sum, count) => sum + (count - expected) ** 2 / expected, 0);
  t.true(chiSquared < 90, `chi-squared ${chiSquared}`);
});

test("codeKey upper-cases, drops dashes, underscores and spaces, and reads O as 0 and I, L as 1", (t) => {
  t.is(codeKey("abcde-fghjk-mnpqr-stvwx"), "ABCDEFGHJKMNPQRSTVWX");
  t.is(codeKey(" AB_cd - ef gh "), "ABCDEFGH");
  t.is(codeKey("oil-OIL"), "011011");
  t.is(codeKey("uU"), "UU");
});

test("codeKey round trips: a generated code matches however it is typed", (t) => {
  for (let index = 0; index < 200; index++) {
    const code = generateActivationCode();
    const key = codeKey(code);
    t.is(codeKey(key), key);
    t.is(codeKey(code.toLowerCase()), key);
    t.is(codeKey(code.replaceAll("-", " ")), key);
    t.is(codeKey(code.replaceAll("-", "")), key);
    t.is(codeKey(code.replaceAll("0", "O").replaceAll("1", "l")), key);
    t.is(presentedCodeKey(`  ${code.toLowerCase()}  `), key);
  }
});

test("vendor-chosen codes: 4 to 64 characters of letters, digits, '-', '_' and space", (t) => {
  t.is(vendorCodeProblem("ACME-2026"), null);
  t.is(vendorCodeProblem("abcd"), null);
  t.is(vendorCodeProblem("a_b c-d"), null);
  t.is(vendorCodeProblem("X".repeat(64)), null);
  t.regex(vendorCodeProblem("X".repeat(65)) ?? "", /at most 64/);
  t.regex(vendorCodeProblem("abc") ?? "", /at least 4/);
  t.regex(vendorCodeProblem("a-b-c-") ?? "", /at least 4/);
  for (const bad of ["ACME/2026", "cöde1234", "code\t1234", "code.1234", "code+1234"]) {
    t.regex(vendorCodeProblem(bad) ?? "", /only letters/, bad);
  }
});

test("presentedCodeKey refuses what no issued code can be", (t) => {
  t.is(presentedCodeKey("abc"), null);
  t.is(presentedCodeKey("ACME/2026"), null);
  t.is(presentedCodeKey("Y".repeat(65)), null);
  t.is(presentedCodeKey("acme-2026"), "ACME2026");
});
