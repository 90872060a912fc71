import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";

const scryptAsync = promisify(scrypt) as (
  password: string,
  salt: Buffer,
  length: number,
  options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

const COST = { N: 2 ** 15, r: 8, p: 1 };
const KEY_LENGTH = 32;

/** A new client secret: 256 random bits, URL-safe. */
export function generateClientSecret(): string {
  return `pcs_${randomBytes(32).toString("base64url")}`;
}

/** A client's new token generation (see ClientRow.tokenGeneration): 128 random bits, URL-safe. */
export function newTokenGeneration(): string {
  return randomBytes(16).toString("base64url");
}

/** `scrypt$N$r$p$salt$hash`, all the verifier needs besides the secret. */
export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(secret, salt, COST);
  return ["scrypt", COST.N, COST.r, COST.p, salt.toString("base64"), hash.toString("base64")].join("$");
}

/** Compares in constant time; a malformed stored hash never matches. */
export async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  if (scheme !== "scrypt" || !salt || !hash || !plausibleCost(cost)) return false;
  const expected = Buffer.from(hash, "base64");
  try {
    const actual = await derive(secret, Buffer.from(salt, "base64"), cost);
    return actual.length === expected.length && timingSafeEqual(actual, expected);
  } catch {
    return false;
  }
}

function plausibleCost({ N, r, p }: { N: number; r: number; p: number }): boolean {
  const powerOfTwo = Number.isInteger(N) && N >= 2 && N <= 2 ** 20 && (N & (N - 1)) === 0;
  return powerOfTwo && Number.isInteger(r) && r >= 1 && r <= 32 && Number.isInteger(p) && p >= 1 && p <= 16;
}

/** A hash that matches nothing, verified against unknown client ids so they take as long as known ones. */
export const DECOY_HASH = `scrypt$${COST.N}$${COST.r}$${COST.p}$${Buffer.alloc(16).toString("base64")}$${Buffer.alloc(KEY_LENGTH).toString("base64")}`;

function derive(secret: string, salt: Buffer, cost: { N: number; r: number; p: number }): Promise<Buffer> {
  return scryptAsync(secret, salt, KEY_LENGTH, { ...cost, maxmem: 256 * cost.N * cost.r + 1024 * 1024 });
}
