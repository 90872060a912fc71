import { createHash } from "node:crypto";
import type { JWTPayload } from "jose";

/** The `ver` claim: the version of the license token's claims. */
export const LICENSE_CLAIMS_VERSION = 1;
const ISSUER_PREFIX = "urn:provision:provider:";

/** What a license token says; each field names the JWT claim it travels in. */
export interface LicenseClaims {
  /** `iss` = `urn:provision:provider:<providerId>`: the provider whose key signed the token. */
  providerId: string;
  /** `sub` and `ent`. */
  entitlementId: string;
  /** `sid`: the license session, as in the session paths. */
  sessionId: string;
  /** `iat`. */
  issuedAt: Date;
  /** `nbf`. */
  notBefore: Date;
  /** `exp`: the end of the lease. */
  leaseEndsAt: Date;
  /** `gex`: the end of the grace period, at or after `exp`; session calls accept the token until then. */
  graceEndsAt: Date;
  /** `prd`: the licensed product ids. */
  productIds: string[];
  /** `fea`: the enabled features, feature code (or id when it has none) → value. */
  features: Record<string, string>;
  /** `fex`: the features of `fea` that end before `gex`, → their end; the claim is left out when there are none. */
  featureEnds: Record<string, Date>;
  /** `off`: the application may run offline (verifying the token with the public key) until `exp`. */
  offlineAllowed: boolean;
  /** `trl`: a trial license. */
  trial: boolean;
  /** `fph`: base64url SHA-256 of the device fingerprint the license was activated for. */
  fingerprintHash: string;
  /** `ver`. */
  version: number;
}

export interface LicenseClaimsInput {
  providerId: string;
  entitlementId: string;
  sessionId: string;
  issuedAt: Date;
  leaseEndsAt: Date;
  graceEndsAt: Date;
  productIds: readonly string[];
  features: Readonly<Record<string, string>>;
  /** Each listed feature's featureExpiration, where it has one. */
  featureExpirations?: Readonly<Record<string, Date>>;
  offlineAllowed: boolean;
  trial: boolean;
  /** The device fingerprint as the application sent it; only its hash goes into the token. */
  fingerprint: string;
}

/** The claims of a new license token, its instants in whole seconds (as a JWT carries them). */
export function buildLicenseClaims(input: LicenseClaimsInput): LicenseClaims {
  const issuedAt = wholeSeconds(input.issuedAt);
  const leaseEndsAt = wholeSeconds(input.leaseEndsAt);
  const graceEndsAt = wholeSeconds(input.graceEndsAt);
  if (graceEndsAt < leaseEndsAt) throw new Error("a license's grace period cannot end before its lease");
  return {
    providerId: input.providerId,
    entitlementId: input.entitlementId,
    sessionId: input.sessionId,
    issuedAt,
    notBefore: issuedAt,
    leaseEndsAt,
    graceEndsAt,
    productIds: [...input.productIds],
    features: { ...input.features },
    featureEnds: endsBefore(input.featureExpirations ?? {}, graceEndsAt),
    offlineAllowed: input.offlineAllowed,
    trial: input.trial,
    fingerprintHash: fingerprintHash(input.fingerprint),
    version: LICENSE_CLAIMS_VERSION,
  };
}

export function fingerprintHash(fingerprint: string): string {
  return createHash("sha256").update(fingerprint, "utf8").digest("base64url");
}

export function licenseIssuer(providerId: string): string {
  return ISSUER_PREFIX + providerId;
}

export function licensePayload(claims: LicenseClaims): JWTPayload {
  return {
    iss: licenseIssuer(claims.providerId),
    sub: claims.entitlementId,
    sid: claims.sessionId,
    iat: numericDate(claims.issuedAt),
    nbf: numericDate(claims.notBefore),
    exp: numericDate(claims.leaseEndsAt),
    gex: numericDate(claims.graceEndsAt),
    ent: claims.entitlementId,
    prd: claims.productIds,
    fea: claims.features,
    ...(Object.keys(claims.featureEnds).length > 0 ? { fex: numericDates(claims.featureEnds) } : {}),
    off: claims.offlineAllowed,
    trl: claims.trial,
    fph: claims.fingerprintHash,
    ver: claims.version,
  };
}

/** The claims of a verified payload; undefined when one is missing or of the wrong type. */
export function claimsOfPayload(payload: Record<string, unknown>): LicenseClaims | undefined {
  const { iss, sub, sid, iat, nbf, exp, gex, ent, prd, fea, fex = {}, off, trl, fph, ver } = payload;
  if (typeof iss !== "string" || !iss.startsWith(ISSUER_PREFIX) || ver !== LICENSE_CLAIMS_VERSION) return undefined;
  if (typeof sub !== "string" || sub !== ent || typeof sid !== "string" || typeof fph !== "string") return undefined;
  if (!isStringArray(prd) || !isStringRecord(fea) || !isDateRecord(fex)) return undefined;
  if (typeof off !== "boolean" || typeof trl !== "boolean") return undefined;
  if (!isNumericDate(iat) || !isNumericDate(nbf) || !isNumericDate(exp) || !isNumericDate(gex)) return undefined;
  return {
    providerId: iss.slice(ISSUER_PREFIX.length),
    entitlementId: sub,
    sessionId: sid,
    issuedAt: fromNumericDate(iat),
    notBefore: fromNumericDate(nbf),
    leaseEndsAt: fromNumericDate(exp),
    graceEndsAt: fromNumericDate(gex),
    productIds: prd,
    features: fea,
    featureEnds: Object.fromEntries(Object.entries(fex).map(([key, seconds]) => [key, fromNumericDate(seconds)])),
    offlineAllowed: off,
    trial: trl,
    fingerprintHash: fph,
    version: LICENSE_CLAIMS_VERSION,
  };
}

/** The ends before `graceEndsAt`, in whole seconds: a later one cannot matter to this token. */
function endsBefore(ends: Readonly<Record<string, Date>>, graceEndsAt: Date): Record<string, Date> {
  const before: Record<string, Date> = {};
  for (const [key, end] of Object.entries(ends)) if (end < graceEndsAt) before[key] = wholeSeconds(end);
  return before;
}

function numericDates(dates: Record<string, Date>): Record<string, number> {
  return Object.fromEntries(Object.entries(dates).map(([key, date]) => [key, numericDate(date)]));
}

function wholeSeconds(date: Date): Date {
  return new Date(numericDate(date) * 1000);
}

function numericDate(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

function fromNumericDate(seconds: number): Date {
  return new Date(seconds * 1000);
}

function isNumericDate(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((item) => typeof item === "string")
  );
}

function isDateRecord(value: unknown): value is Record<string, number> {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every(isNumericDate)
  );
}
