import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test, { type ExecutionContext } from "ava";
import { base64url, importSPKI, jwtVerify, SignJWT } from "jose";
import type { DataSource } from "typeorm";
import { openDatabase } from "../../src/app.js";
import { LicenseSigningKeyEntity } from "../../src/licensing/entities.js";
import { buildLicenseClaims, licensePayload } from "../../src/licensing/license-claims.js";
import { ACTIVE_KEY_REFRESH_MS, LicenseKeys } from "../../src/licensing/license-keys.js";
import { LICENSE_TOKEN_TYPE, LicenseTokens } from "../../src/licensing/license-tokens.js";
import type { Clock } from "../../src/platform/clock.js";
import { loadConfig } from "../../src/platform/config.js";
import { connectDatabase, migrate } from "../../src/platform/database.js";
import { DomainError } from "../../src/platform/errors.js";
import { manualClock } from "../support/manual-clock.js";
import { createTestDatabase } from "../support/test-server.js";

type Kind = "mysql" | "sqlite";
const KINDS: Kind[] = ["mysql", "sqlite"];
const HOUR = 3600_000;

interface Database {
  /** Connects a new DataSource to the same database: what a restarted (or another) instance does. */
  open(): Promise<DataSource>;
}

/** A fresh migrated database of `kind`, dropped when the test ends. */
async function freshDatabase(t: ExecutionContext, kind: Kind): Promise<Database> {
  let url: string;
  if (kind === "mysql") {
    const database = await createTestDatabase();
    t.teardown(() => database.drop());
    url = database.url;
  } else {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-license-keys-"));
    t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
    url = `sqlite:${path.join(directory, "provision.sqlite")}`;
  }
  const open = async () => {
    const dataSource = await connectDatabase(openDatabase(loadConfig({ DATABASE_URL: url })));
    t.teardown(() => (dataSource.isInitialized ? dataSource.destroy() : undefined));
    return dataSource;
  };
  await migrate(await open());
  return { open };
}

const newKeyEncryptionKey = () => randomBytes(32);

function claimsFor(providerId: string, clock: Clock, overrides: { leaseMs?: number; graceMs?: number } = {}) {
  const now = clock.now();
  const leaseEndsAt = new Date(now.getTime() + (overrides.leaseMs ?? HOUR));
  return buildLicenseClaims({
    providerId,
    entitlementId: randomUUID(),
    sessionId: randomUUID(),
    issuedAt: now,
    leaseEndsAt,
    graceEndsAt: new Date(leaseEndsAt.getTime() + (overrides.graceMs ?? 24 * HOUR)),
    productIds: [randomUUID(), randomUUID()],
    features: { "export-pdf": "true", "max-projects": "10" },
    offlineAllowed: true,
    trial: false,
    fingerprint: "device-fingerprint-1",
  });
}

async function refusal(t: ExecutionContext, verifying: Promise<unknown>, token: string): Promise<DomainError> {
  const error = await t.throwsAsync(verifying, { instanceOf: DomainError });
  t.is(error.kind, "unauthenticated");
  t.is(error.slug, "invalid-license-token");
  t.regex(error.headers["www-authenticate"] ?? "", /^Bearer /);
  t.false(JSON.stringify({ message: error.message, headers: error.headers }).includes(token));
  return error;
}

/** The token with its payload replaced, header and signature kept. */
function withPayload(token: string, payload: Record<string, unknown>): string {
  const [header, , signature] = token.split(".");
  return [header, base64url.encode(JSON.stringify(payload)), signature].join(".");
}

/** What an application does offline: import the base64 SPKI it was given and verify with jose. */
async function verifyOffline(token: string, publicKeyBase64: string, providerId: string, clock: Clock) {
  const pem = `-----BEGIN PUBLIC KEY-----\n${publicKeyBase64}\n-----END PUBLIC KEY-----`;
  const publicKey = await importSPKI(pem, "EdDSA");
  const { payload } = await jwtVerify(token, publicKey, {
    algorithms: ["EdDSA"],
    typ: "license+jwt",
    issuer: `urn:provision:provider:${providerId}`,
    currentDate: clock.now(),
  });
  return payload;
}

for (const kind of KINDS) {
  async function setup(t: ExecutionContext, keyEncryptionKey = newKeyEncryptionKey(), clock = manualClock()) {
    const database = await freshDatabase(t, kind);
    const dataSource = await database.open();
    const keys = new LicenseKeys(dataSource, clock, keyEncryptionKey);
    return { database, dataSource, clock, keys, tokens: new LicenseTokens(keys, clock), keyEncryptionKey };
  }

  test(`${kind}: a signed token verifies to the claims it was signed with, with kid and typ in its header`, async (t) => {
    const { tokens, clock } = await setup(t);
    const providerId = randomUUID();
    const claims = claimsFor(providerId, clock);
    const token = await tokens.sign(claims);
    const [header] = token.split(".");
    t.like(JSON.parse(Buffer.from(header ?? "", "base64url").toString()), {
      alg: "EdDSA",
      typ: LICENSE_TOKEN_TYPE,
      kid: `${providerId}.1`,
    });
    t.deepEqual({ ...(await tokens.verify(token)) }, claims);
  });

  test(`${kind}: an application verifies a token offline with jose and only the base64 SPKI`, async (t) => {
    const { keys, tokens, clock } = await setup(t);
    const providerId = randomUUID();
    const claims = claimsFor(providerId, clock);
    const token = await tokens.sign(claims);
    const publicKeyBase64 = await keys.publicKeyBase64(providerId);
    t.regex(publicKeyBase64, /^[A-Za-z0-9+/]+=*$/);
    t.deepEqual(await verifyOffline(token, publicKeyBase64, providerId, clock), licensePayload(claims));
    const otherProvider = randomUUID();
    await t.throwsAsync(verifyOffline(token, await keys.publicKeyBase64(otherProvider), providerId, clock));
  });

  test(`${kind}: a token whose payload or signature was changed is refused`, async (t) => {
    const { tokens, clock } = await setup(t);
    const claims = claimsFor(randomUUID(), clock);
    const token = await tokens.sign(claims);
    const longer = withPayload(token, {
      ...licensePayload(claims),
      exp: (licensePayload(claims).exp as number) + 86400,
    });
    const moreFeatures = withPayload(token, { ...licensePayload(claims), fea: { "export-pdf": "true", all: "true" } });
    const [header, payload, signature = ""] = token.split(".");
    const flipped = `${signature.startsWith("A") ? "B" : "A"}${signature.slice(1)}`;
    for (const tampered of [longer, moreFeatures, [header, payload, flipped].join("."), `${token}x`, "not.a.jwt"]) {
      await refusal(t, tokens.verify(tampered), tampered);
    }
  });

  test(`${kind}: a token naming another provider's key, or signed by it, is refused`, async (t) => {
    const { keys, tokens, clock } = await setup(t);
    const victim = randomUUID();
    const attacker = randomUUID();
    const attackerKey = await keys.signingKey(attacker);
    const victimKid = (await keys.signingKey(victim)).kid;
    const claims = claimsFor(victim, clock);
    const header = { alg: "EdDSA", typ: LICENSE_TOKEN_TYPE };
    const signedByAttacker = await new SignJWT(licensePayload(claims))
      .setProtectedHeader({ ...header, kid: attackerKey.kid })
      .sign(attackerKey.privateKey);
    const claimingVictimsKey = await new SignJWT(licensePayload(claims))
      .setProtectedHeader({ ...header, kid: victimKid })
      .sign(attackerKey.privateKey);
    for (const forged of [signedByAttacker, claimingVictimsKey]) await refusal(t, tokens.verify(forged), forged);
    t.is((await tokens.verify(await tokens.sign(claims))).providerId, victim);
  });

  test(`${kind}: a token whose kid names no key is refused`, async (t) => {
    const { keys, tokens, clock } = await setup(t);
    const providerId = randomUUID();
    const { privateKey } = await keys.signingKey(providerId);
    const payload = licensePayload(claimsFor(providerId, clock));
    for (const kid of [`${providerId}.2`, `${randomUUID()}.1`, "../../etc/passwd", ""]) {
      const token = await new SignJWT(payload)
        .setProtectedHeader({ alg: "EdDSA", typ: LICENSE_TOKEN_TYPE, kid })
        .sign(privateKey);
      await refusal(t, tokens.verify(token), token);
    }
  });

  test(`${kind}: a token is accepted after exp through its grace period, and refused after it`, async (t) => {
    const { tokens, clock } = await setup(t);
    const claims = claimsFor(randomUUID(), clock, { leaseMs: HOUR, graceMs: 2 * HOUR });
    const token = await tokens.sign(claims);
    clock.advance(HOUR + 1000);
    t.true(clock.now() > claims.leaseEndsAt);
    t.is((await tokens.verify(token)).sessionId, claims.sessionId);
    clock.advance(2 * HOUR - 1000);
    t.is(clock.now().getTime(), claims.graceEndsAt.getTime());
    t.is((await tokens.verify(token)).sessionId, claims.sessionId);
    clock.advance(1000);
    const error = await refusal(t, tokens.verify(token), token);
    t.regex(error.headers["www-authenticate"] ?? "", /expired/);
    const issuedEarlier = manualClock(clock.now().getTime() - 4 * HOUR);
    const neverVerified = await tokens.sign(claimsFor(randomUUID(), issuedEarlier, { leaseMs: HOUR, graceMs: HOUR }));
    await refusal(t, tokens.verify(neverVerified), neverVerified);
    const early = await tokens.sign(claimsFor(randomUUID(), manualClock(clock.now().getTime() + 60_000)));
    t.regex((await refusal(t, tokens.verify(early), early)).message, /not valid yet/);
    const withinSkew = await tokens.sign(claimsFor(randomUUID(), manualClock(clock.now().getTime() + 20_000)));
    t.truthy(await tokens.verify(withinSkew));
  });

  test(`${kind}: a repeat of a verified token is answered without checking its signature`, async (t) => {
    const { tokens, clock } = await setup(t);
    const token = await tokens.sign(claimsFor(randomUUID(), clock));
    const first = await tokens.verify(token);
    t.is(tokens.signatureChecks, 1);
    for (let repeat = 0; repeat < 5; repeat++) t.deepEqual(await tokens.verify(token), first);
    t.is(tokens.signatureChecks, 1);
    t.true(Object.isFrozen(first) && Object.isFrozen(first.features) && Object.isFrozen(first.productIds));
    await tokens.verify(await tokens.sign(claimsFor(randomUUID(), clock)));
    t.is(tokens.signatureChecks, 2);
    const forged = withPayload(token, { ...licensePayload(first), trl: true });
    await refusal(t, tokens.verify(forged), forged);
    await refusal(t, tokens.verify(forged), forged);
    t.is(tokens.signatureChecks, 4, "a refused token is never remembered");
  });

  test(`${kind}: requests bringing a token not seen yet at once share one signature check`, async (t) => {
    const { tokens, clock } = await setup(t);
    const token = await tokens.sign(claimsFor(randomUUID(), clock));
    const answers = await Promise.all(Array.from({ length: 32 }, () => tokens.verify(token)));
    t.is(tokens.signatureChecks, 1);
    for (const claims of answers) t.is(claims, answers[0]);
    const forged = withPayload(token, { ...licensePayload(answers[0]), trl: true });
    const refusals = await Promise.allSettled(Array.from({ length: 8 }, () => tokens.verify(forged)));
    t.true(refusals.every((settled) => settled.status === "rejected"));
    t.is(tokens.signatureChecks, 2, "the forged token's eight requests shared one check");
    await refusal(t, tokens.verify(forged), forged);
    t.is(tokens.signatureChecks, 3, "a refusal is not remembered once its check is over");
  });

  test(`${kind}: keys persist across a restart, and tokens signed before it still verify`, async (t) => {
    const { database, dataSource, keys, tokens, clock, keyEncryptionKey } = await setup(t);
    const providerId = randomUUID();
    const token = await tokens.sign(claimsFor(providerId, clock));
    const publicKeyBase64 = await keys.publicKeyBase64(providerId);
    await dataSource.destroy();

    const restarted = new LicenseKeys(await database.open(), clock, keyEncryptionKey);
    const restartedTokens = new LicenseTokens(restarted, clock);
    t.is(await restarted.publicKeyBase64(providerId), publicKeyBase64);
    t.is((await restartedTokens.verify(token)).providerId, providerId);
    const after = await restartedTokens.sign(claimsFor(providerId, clock));
    await verifyOffline(after, publicKeyBase64, providerId, clock);
    t.pass();
  });

  test(`${kind}: private keys are sealed at rest and need the key-encryption key to sign`, async (t) => {
    const { dataSource, tokens, clock } = await setup(t);
    const providerId = randomUUID();
    const token = await tokens.sign(claimsFor(providerId, clock));
    const [row] = await dataSource.getRepository(LicenseSigningKeyEntity).findBy({ providerId });
    t.truthy(row);
    t.regex(row?.sealedPrivateKey ?? "", /^aes256gcm:/);
    t.false(/"d"|OKP|Ed25519/.test(row?.sealedPrivateKey ?? ""));

    const wrongKey = new LicenseKeys(dataSource, clock, newKeyEncryptionKey());
    await t.throwsAsync(wrongKey.signingKey(providerId), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
    const noKey = new LicenseKeys(dataSource, clock, undefined);
    await t.throwsAsync(noKey.signingKey(providerId), { message: /PROVISION_KEY_ENCRYPTION_KEY/ });
    t.is((await new LicenseTokens(noKey, clock).verify(token)).providerId, providerId, "verifying needs no secret");
  });

  test(`${kind}: ten instances' concurrent first uses leave one active key, which all of them sign with`, async (t) => {
    const { dataSource, clock, keyEncryptionKey } = await setup(t);
    const providerId = randomUUID();
    const instances = Array.from({ length: 10 }, () => new LicenseKeys(dataSource, clock, keyEncryptionKey));
    const used = await Promise.all(instances.map((keys) => keys.signingKey(providerId)));
    const rows = await dataSource.getRepository(LicenseSigningKeyEntity).findBy({ providerId });
    t.is(rows.length, 1);
    t.is(rows[0]?.retiredAt, null);
    t.deepEqual(new Set(used.map((key) => key.kid)), new Set([rows[0]?.kid]));
    t.deepEqual(new Set(used.map((key) => key.publicKeyBase64)), new Set([rows[0]?.publicKeySpki]));
  });

  test(`${kind}: rotation makes a new active key; the old one is retired and keeps verifying`, async (t) => {
    const { dataSource, keys, tokens, clock, keyEncryptionKey } = await setup(t);
    const providerId = randomUUID();
    const other = new LicenseKeys(dataSource, clock, keyEncryptionKey);
    const before = await tokens.sign(claimsFor(providerId, clock));
    const oldPublicKey = await keys.publicKeyBase64(providerId);
    t.is((await other.signingKey(providerId)).kid, `${providerId}.1`);

    const kid = await keys.rotate(providerId);
    t.is(kid, `${providerId}.2`);
    const rows = await dataSource.getRepository(LicenseSigningKeyEntity).find({ where: { providerId } });
    t.deepEqual(rows.map((row) => [row.kid, row.retiredAt !== null]).sort(), [
      [`${providerId}.1`, true],
      [`${providerId}.2`, false],
    ]);
    const after = await tokens.sign(claimsFor(providerId, clock));
    t.not(await keys.publicKeyBase64(providerId), oldPublicKey);
    await verifyOffline(after, await keys.publicKeyBase64(providerId), providerId, clock);
    await verifyOffline(before, oldPublicKey, providerId, clock);
    const elsewhere = new LicenseTokens(new LicenseKeys(dataSource, clock, undefined), clock);
    t.is((await elsewhere.verify(before)).providerId, providerId);
    t.is((await elsewhere.verify(after)).providerId, providerId);

    t.is((await other.signingKey(providerId)).kid, `${providerId}.1`, "another instance signs on until it refreshes");
    clock.advance(ACTIVE_KEY_REFRESH_MS + 1);
    t.is((await other.signingKey(providerId)).kid, kid);
  });

  test(`${kind}: rotations by several instances at once leave one active key, the newest`, async (t) => {
    const { dataSource, clock, keyEncryptionKey } = await setup(t);
    const providerId = randomUUID();
    const instances = Array.from({ length: 5 }, () => new LicenseKeys(dataSource, clock, keyEncryptionKey));
    await instances[0]?.signingKey(providerId);
    const answered = await Promise.all(instances.map((keys) => keys.rotate(providerId)));
    const rows = await dataSource.getRepository(LicenseSigningKeyEntity).find({ where: { providerId } });
    const generations = rows.map((row) => Number(row.kid.split(".")[1])).sort((a, b) => a - b);
    t.deepEqual(
      generations,
      generations.map((_, index) => index + 1),
    );
    t.true(rows.length >= 2);
    const active = rows.filter((row) => row.retiredAt === null);
    t.deepEqual(
      active.map((row) => row.kid),
      [`${providerId}.${rows.length}`],
    );
    t.true(answered.every((kid) => rows.some((row) => row.kid === kid)));
    t.true(answered.includes(active[0]?.kid ?? ""));
  });

  test(`${kind}: an instance keeps signing with its loaded key when a refresh cannot reach the database`, async (t) => {
    const { dataSource, keys, tokens, clock } = await setup(t);
    const providerId = randomUUID();
    const { kid } = await keys.signingKey(providerId);
    await dataSource.destroy();
    clock.advance(ACTIVE_KEY_REFRESH_MS + 1);
    t.is((await keys.signingKey(providerId)).kid, kid);
    const token = await tokens.sign(claimsFor(providerId, clock));
    t.is((await tokens.verify(token)).providerId, providerId);
    await t.throwsAsync(keys.signingKey(randomUUID()));
  });
}
