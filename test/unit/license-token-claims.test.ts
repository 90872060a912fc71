import test from "ava";
import { VerifiedTokenCache } from "../../src/auth/verified-token-cache.js";
import {
  buildLicenseClaims,
  claimsOfPayload,
  fingerprintHash,
  type LicenseClaims,
  type LicenseClaimsInput,
  licensePayload,
} from "../../src/licensing/license-claims.js";

const PROVIDER = "5b0c3a52-8a53-4b8e-9d0f-0d7c52f3a001";
const ENTITLEMENT = "5b0c3a52-8a53-4b8e-9d0f-0d7c52f3a002";
const SESSION = "5b0c3a52-8a53-4b8e-9d0f-0d7c52f3a003";
const PRODUCT = "5b0c3a52-8a53-4b8e-9d0f-0d7c52f3a004";

function input(overrides: Partial<LicenseClaimsInput> = {}): LicenseClaimsInput {
  return {
    providerId: PROVIDER,
    entitlementId: ENTITLEMENT,
    sessionId: SESSION,
    issuedAt: new Date("2026-03-01T12:00:00.750Z"),
    leaseEndsAt: new Date("2026-03-02T12:00:00.999Z"),
    graceEndsAt: new Date("2026-03-09T12:00:00.100Z"),
    productIds: [PRODUCT],
    features: { "export-pdf": "true", seats: "5" },
    offlineAllowed: true,
    trial: false,
    fingerprint: "abc",
    ...overrides,
  };
}

test("the builder carries instants in whole seconds, nbf at iat, and only a hash of the fingerprint", (t) => {
  const claims = buildLicenseClaims(input());
  t.deepEqual(claims, {
    providerId: PROVIDER,
    entitlementId: ENTITLEMENT,
    sessionId: SESSION,
    issuedAt: new Date("2026-03-01T12:00:00Z"),
    notBefore: new Date("2026-03-01T12:00:00Z"),
    leaseEndsAt: new Date("2026-03-02T12:00:00Z"),
    graceEndsAt: new Date("2026-03-09T12:00:00Z"),
    productIds: [PRODUCT],
    features: { "export-pdf": "true", seats: "5" },
    featureEnds: {},
    offlineAllowed: true,
    trial: false,
    // SHA-256("abc"), base64url without padding.
    fingerprintHash: "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0",
    version: 1,
  });
  t.is(fingerprintHash("abc"), claims.fingerprintHash);
});

test("the builder copies products and features, so later changes to its input do not reach the claims", (t) => {
  const productIds = [PRODUCT];
  const features: Record<string, string> = { a: "1" };
  const claims = buildLicenseClaims(input({ productIds, features }));
  productIds.push("other");
  features.b = "2";
  t.deepEqual(claims.productIds, [PRODUCT]);
  t.deepEqual(claims.features, { a: "1" });
});

test("the builder refuses a grace period that ends before the lease", (t) => {
  t.throws(() => buildLicenseClaims(input({ graceEndsAt: new Date("2026-03-02T11:59:59Z") })), {
    message: /grace period/,
  });
  const noGrace = buildLicenseClaims(input({ graceEndsAt: new Date("2026-03-02T12:00:00Z") }));
  t.is(noGrace.graceEndsAt.getTime(), noGrace.leaseEndsAt.getTime());
});

test("the payload holds exactly the documented claims, with NumericDate instants", (t) => {
  t.deepEqual(licensePayload(buildLicenseClaims(input({ trial: true, offlineAllowed: false }))), {
    iss: `urn:provision:provider:${PROVIDER}`,
    sub: ENTITLEMENT,
    sid: SESSION,
    iat: Date.parse("2026-03-01T12:00:00Z") / 1000,
    nbf: Date.parse("2026-03-01T12:00:00Z") / 1000,
    exp: Date.parse("2026-03-02T12:00:00Z") / 1000,
    gex: Date.parse("2026-03-09T12:00:00Z") / 1000,
    ent: ENTITLEMENT,
    prd: [PRODUCT],
    fea: { "export-pdf": "true", seats: "5" },
    off: false,
    trl: true,
    fph: "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0",
    ver: 1,
  });
});

test("features ending before the grace end are named in `fex`, in whole seconds; later ends are not", (t) => {
  const claims = buildLicenseClaims(
    input({
      featureExpirations: {
        "export-pdf": new Date("2026-03-05T08:30:00.900Z"),
        seats: new Date("2026-03-09T12:00:00.100Z"),
      },
    }),
  );
  t.deepEqual(claims.featureEnds, { "export-pdf": new Date("2026-03-05T08:30:00Z") });
  t.deepEqual(licensePayload(claims).fex, { "export-pdf": Date.parse("2026-03-05T08:30:00Z") / 1000 });
  t.deepEqual(claimsOfPayload(JSON.parse(JSON.stringify(licensePayload(claims)))), claims);
});

test("a payload reads back to the claims it was made from", (t) => {
  const claims = buildLicenseClaims(input());
  t.deepEqual(claimsOfPayload(JSON.parse(JSON.stringify(licensePayload(claims)))), claims);
});

test("a payload with a claim missing, of the wrong type or of another version reads as nothing", (t) => {
  const payload = licensePayload(buildLicenseClaims(input())) as Record<string, unknown>;
  const broken: Record<string, unknown>[] = [
    ...Object.keys(payload).map((name) => ({ ...payload, [name]: undefined })),
    { ...payload, iss: PROVIDER },
    { ...payload, sub: SESSION },
    { ...payload, exp: "1772452800" },
    { ...payload, gex: 1.5 },
    { ...payload, iat: -1 },
    { ...payload, prd: PRODUCT },
    { ...payload, prd: [1] },
    { ...payload, fea: ["true"] },
    { ...payload, fea: { seats: 5 } },
    { ...payload, fex: { seats: "1772452800" } },
    { ...payload, fex: [1772452800] },
    { ...payload, off: "true" },
    { ...payload, trl: 0 },
    { ...payload, ver: 2 },
  ];
  for (const candidate of broken) t.is(claimsOfPayload(candidate), undefined, JSON.stringify(candidate));
});

test("the verified-license cache forgets a token after its grace period and the least recently used first", (t) => {
  const cache = new VerifiedTokenCache<LicenseClaims>(2);
  const claims = buildLicenseClaims(input());
  cache.set("token-a", claims, 1000, 0);
  cache.set("token-b", claims, 5000, 0);
  t.is(cache.get("token-a", 1000), claims);
  t.is(cache.get("token-a", 1001), undefined);
  cache.set("token-a", claims, 5000, 1001);
  cache.get("token-b", 1500);
  cache.set("token-c", claims, 5000, 1500);
  t.is(cache.size, 2);
  t.is(cache.get("token-a", 1500), undefined);
  t.is(cache.get("token-b", 1500), claims);
  t.is(cache.get("token-c", 1500), claims);
});
