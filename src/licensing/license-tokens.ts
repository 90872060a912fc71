import { KeyObject, sign, type webcrypto } from "node:crypto";
import { type CryptoKey, compactVerify, decodeProtectedHeader } from "jose";
import { bearerChallenge } from "../auth/access-tokens.js";
import { CLOCK_SKEW_SECONDS } from "../auth/key-store.js";
import { VerifiedTokenCache } from "../auth/verified-token-cache.js";
import type { Clock } from "../platform/clock.js";
import { DomainError } from "../platform/errors.js";
import { SingleFlight } from "../platform/single-flight.js";
import { claimsOfPayload, type LicenseClaims, licensePayload } from "./license-claims.js";
import { LICENSE_TOKEN_ALGORITHM, type LicenseKeys } from "./license-keys.js";

export const LICENSE_TOKEN_TYPE = "license+jwt";
/** Longer tokens are refused unread (a token with a thousand features stays far below). */
export const MAX_LICENSE_TOKEN_LENGTH = 256 * 1024;

/**
 * License tokens: JWS compact, EdDSA, signed with the provider's active key (header `kid`, `typ`
 * `license+jwt`). A token is accepted from `nbf` (less the clock skew instances may have) through `gex`, the
 * end of its grace period, not only until `exp`. A token verified once is remembered (by hash) until then.
 */
/** Verified tokens one instance remembers: one per live session it serves, as many as sessions it caches. */
export const LICENSE_TOKEN_CACHE_SIZE = 100_000;

export class LicenseTokens {
  private readonly verified: VerifiedTokenCache<LicenseClaims>;
  /** Verifications under way, by token: requests bringing one token at once share its check. */
  private readonly verifying = new SingleFlight<LicenseClaims>();
  private checks = 0;

  constructor(
    private readonly keys: LicenseKeys,
    private readonly clock: Clock,
    cacheCapacity = LICENSE_TOKEN_CACHE_SIZE,
  ) {
    this.verified = new VerifiedTokenCache<LicenseClaims>(cacheCapacity);
  }

  /** How many signatures `verify` has checked: a repeat answered from the cache checks none. */
  get signatureChecks(): number {
    return this.checks;
  }

  /**
   * The JWS compact token of `claims`, signed with node:crypto at once: WebCrypto's sign (what jose's SignJWT
   * uses) goes through a job and a promise and cost several times as much per activation and renewal.
   */
  async sign(claims: LicenseClaims): Promise<string> {
    const { kid, privateKey } = await this.keys.signingKey(claims.providerId);
    const header = { alg: LICENSE_TOKEN_ALGORITHM, kid, typ: LICENSE_TOKEN_TYPE };
    const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(licensePayload(claims)))}`;
    return `${input}.${sign(null, Buffer.from(input), keyObjectOf(privateKey)).toString("base64url")}`;
  }

  /** The claims of a token verified before and still accepted; undefined when it would have to be checked. */
  remembered(token: string): LicenseClaims | undefined {
    return this.verified.get(token, this.clock.now().getTime());
  }

  /**
   * The claims of a token accepted now; an `unauthenticated` DomainError (never quoting the token) otherwise.
   * Requests that bring a token not seen yet at once (an application's first calls, an instance just started)
   * wait for one check of its signature.
   */
  async verify(token: string): Promise<LicenseClaims> {
    const nowMs = this.clock.now().getTime();
    const remembered = this.verified.get(token, nowMs);
    if (remembered) return remembered;
    return this.verifying.run(token, () => this.verifyAndRemember(token, nowMs));
  }

  private async verifyAndRemember(token: string, nowMs: number): Promise<LicenseClaims> {
    const claims = await this.verifySigned(token);
    if (nowMs + CLOCK_SKEW_SECONDS * 1000 < claims.notBefore.getTime())
      throw refused("the license token is not valid yet");
    if (nowMs > claims.graceEndsAt.getTime()) throw refused("the license token's grace period has ended", "expired");
    this.verified.set(token, claims, claims.graceEndsAt.getTime(), nowMs);
    return claims;
  }

  private async verifySigned(token: string): Promise<LicenseClaims> {
    if (token.length > MAX_LICENSE_TOKEN_LENGTH) throw refused("the license token is not valid");
    const kid = keyIdOf(token);
    const key = kid === undefined ? undefined : await this.keys.verificationKey(kid);
    if (!key) throw refused("the license token is not valid");
    this.checks++;
    const payload = await compactVerify(token, key.publicKey, { algorithms: [LICENSE_TOKEN_ALGORITHM] }).then(
      (verified) => parsePayload(verified.payload),
      () => undefined,
    );
    const claims = payload && claimsOfPayload(payload);
    if (!claims || claims.providerId !== key.providerId) throw refused("the license token is not valid");
    return frozen(claims);
  }
}

const keyObjects = new WeakMap<CryptoKey, KeyObject>();

function keyObjectOf(key: CryptoKey): KeyObject {
  let keyObject = keyObjects.get(key);
  if (!keyObject) {
    keyObject = KeyObject.from(key as unknown as webcrypto.CryptoKey);
    keyObjects.set(key, keyObject);
  }
  return keyObject;
}

function base64url(text: string): string {
  return Buffer.from(text).toString("base64url");
}

/** Claims shared by every caller of a cached token: none may change them for the others. */
function frozen(claims: LicenseClaims): LicenseClaims {
  Object.freeze(claims.productIds);
  Object.freeze(claims.features);
  return Object.freeze(claims);
}

/** The `kid` of a well-formed license token's header; undefined for anything else. */
function keyIdOf(token: string): string | undefined {
  try {
    const header = decodeProtectedHeader(token);
    const wellFormed = header.alg === LICENSE_TOKEN_ALGORITHM && header.typ === LICENSE_TOKEN_TYPE;
    return wellFormed && typeof header.kid === "string" ? header.kid : undefined;
  } catch {
    return undefined;
  }
}

function parsePayload(bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    const payload: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? (payload as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function refused(message: string, description = "invalid license token"): DomainError {
  return new DomainError("unauthenticated", message, {
    slug: "invalid-license-token",
    headers: { "www-authenticate": bearerChallenge("invalid_token", description) },
  });
}
