import { randomBytes } from "node:crypto";
import test from "ava";
import { sealPrivateKey, unsealPrivateKey } from "../../src/auth/key-sealing.js";
import { DECOY_HASH, generateClientSecret, hashSecret, verifySecret } from "../../src/auth/secrets.js";

const PRIVATE_JWK = JSON.stringify({ kty: "EC", crv: "P-256", x: "x-part", y: "y-part", d: "private-part" });

test("a hashed secret verifies with the same secret and not with another", async (t) => {
  const stored = await hashSecret("correct horse battery staple");
  t.regex(stored, /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
  t.false(stored.includes("correct horse"));
  t.true(await verifySecret("correct horse battery staple", stored));
  t.false(await verifySecret("correct horse battery stapl", stored));
  t.false(await verifySecret("", stored));
});

test("two hashes of one secret differ because each is salted", async (t) => {
  const [first, second] = await Promise.all([hashSecret("same secret"), hashSecret("same secret")]);
  t.not(first, second);
  t.true(await verifySecret("same secret", first));
  t.true(await verifySecret("same secret", second));
});

test("the decoy hash matches no secret", async (t) => {
  t.false(await verifySecret("", DECOY_HASH));
  t.false(await verifySecret("anything", DECOY_HASH));
});

test("a malformed stored hash never matches", async (t) => {
  const stored = await hashSecret("s3cret");
  const [, n, r, p, salt, hash] = stored.split("$");
  const malformed = [
    "",
    "s3cret",
    "scrypt$",
    `bcrypt$${n}$${r}$${p}$${salt}$${hash}`,
    `scrypt$${n}$${r}$${p}$$${hash}`,
    `scrypt$${n}$${r}$${p}$${salt}$`,
    `scrypt$${n}$${r}$${p}$${salt}$${Buffer.from(hash, "base64").subarray(0, 16).toString("base64")}`,
  ];
  for (const candidate of malformed) t.false(await verifySecret("s3cret", candidate), candidate);
});

test("a stored hash with unusable cost parameters answers no match rather than throwing", async (t) => {
  const stored = await hashSecret("s3cret");
  const [, , r, p, salt, hash] = stored.split("$");
  for (const n of ["x", "1000", "-1", ""]) {
    const candidate = `scrypt$${n}$${r}$${p}$${salt}$${hash}`;
    t.is(await verifySecret("s3cret", candidate).catch((error: Error) => `threw: ${error.message}`), false, candidate);
  }
});

test("a generated client secret carries 256 random bits in base64url", (t) => {
  const secrets = new Set(Array.from({ length: 20 }, generateClientSecret));
  t.is(secrets.size, 20);
  for (const secret of secrets) {
    t.regex(secret, /^pcs_[A-Za-z0-9_-]{43}$/);
    t.is(Buffer.from(secret.slice("pcs_".length), "base64url").length, 32);
  }
});

test("a private key sealed with a key-encryption key opens with that key", (t) => {
  const key = randomBytes(32);
  const sealed = sealPrivateKey(PRIVATE_JWK, key);
  t.true(sealed.startsWith("aes256gcm:"));
  t.false(sealed.includes("private-part"));
  t.is(unsealPrivateKey(sealed, key), PRIVATE_JWK);
});

test("sealing the same key twice gives different ciphertexts", (t) => {
  const key = randomBytes(32);
  t.not(sealPrivateKey(PRIVATE_JWK, key), sealPrivateKey(PRIVATE_JWK, key));
});

test("a sealed key does not open with another key-encryption key", (t) => {
  const sealed = sealPrivateKey(PRIVATE_JWK, randomBytes(32));
  t.throws(() => unsealPrivateKey(sealed, randomBytes(32)), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
});

test("a sealed key does not open without a key-encryption key", (t) => {
  const sealed = sealPrivateKey(PRIVATE_JWK, randomBytes(32));
  t.throws(() => unsealPrivateKey(sealed, undefined), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
});

/** The three base64 parts of a sealed value: iv, authentication tag, ciphertext. */
function parts(sealed: string): Buffer[] {
  return sealed
    .slice("aes256gcm:".length)
    .split(".")
    .map((part) => Buffer.from(part, "base64"));
}

function join(parts: Buffer[]): string {
  return `aes256gcm:${parts.map((part) => part.toString("base64")).join(".")}`;
}

test("a sealed key with a changed ciphertext byte does not open", (t) => {
  const key = randomBytes(32);
  const [iv, tag, sealed] = parts(sealPrivateKey(PRIVATE_JWK, key));
  sealed[5] ^= 0x01;
  t.throws(() => unsealPrivateKey(join([iv, tag, sealed]), key), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
});

test("a sealed key with a changed authentication tag or iv does not open", (t) => {
  const key = randomBytes(32);
  const [iv, tag, sealed] = parts(sealPrivateKey(PRIVATE_JWK, key));
  const otherTag = Buffer.from(tag);
  otherTag[0] ^= 0x80;
  const otherIv = Buffer.from(iv);
  otherIv[11] ^= 0x01;
  t.throws(() => unsealPrivateKey(join([iv, otherTag, sealed]), key), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
  t.throws(() => unsealPrivateKey(join([otherIv, tag, sealed]), key), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
});

test("a sealed key whose authentication tag was cut short does not open", (t) => {
  const key = randomBytes(32);
  const [iv, tag, sealed] = parts(sealPrivateKey(PRIVATE_JWK, key));
  t.throws(() => unsealPrivateKey(join([iv, tag.subarray(0, 4), sealed]), key), {
    message: /PROVISION_KEY_ENCRYPTION_KEY/,
  });
});

test("a sealed value cut short before its tag is refused naming the key-encryption key", (t) => {
  const key = randomBytes(32);
  const [iv] = parts(sealPrivateKey(PRIVATE_JWK, key));
  t.throws(() => unsealPrivateKey(join([iv]), key), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
});

test("a key stored in the plain format reads back with or without a key-encryption key", (t) => {
  const stored = sealPrivateKey(PRIVATE_JWK, undefined);
  t.is(stored, `plain:${PRIVATE_JWK}`);
  t.is(unsealPrivateKey(stored, undefined), PRIVATE_JWK);
  t.is(unsealPrivateKey(stored, randomBytes(32)), PRIVATE_JWK);
});

test("a key stored in an unknown format is refused", (t) => {
  t.throws(() => unsealPrivateKey(PRIVATE_JWK, randomBytes(32)), { message: /unknown format/ });
});
