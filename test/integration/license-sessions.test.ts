import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { importSPKI, jwtVerify } from "jose";
import { ACTIVE_KEY_REFRESH_MS, LicenseKeys } from "../../src/licensing/license-keys.js";
import {
  activate,
  ENTITLEMENTS,
  entitlementWithCode,
  licenseClaimsOf,
  sessionCall,
  sessionIdOf,
} from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

interface Context {
  servers: Record<string, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-sessions-"));
  t.context.servers = {};
  for (const mode of MODES) {
    const clock = manualClock(Date.now());
    const server = await startTestServer({
      clock,
      ...(mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {}),
    });
    t.context.servers[mode] = { server, clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

const FLOATING = {
  claimBasedActivation: {
    numberOfSeats: 2,
    isFloatingLicense: true,
    leaseTime: "00:02:00",
    gracePeriod: "00:01:00",
    allowOffLineUse: true,
  },
};

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

each("activation answers a license an application verifies offline with the returned key alone", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { entitlementId, code, productId } = await entitlementWithCode(server.baseUrl, FLOATING);
  const answer = await activate(server.baseUrl, { activationCode: code.toLowerCase(), fingerprint: "laptop-1" });
  t.is(answer.status, 200, JSON.stringify(answer.body));
  const license = answer.body;
  t.deepEqual(license.licensedProducts, [productId]);
  const pem = `-----BEGIN PUBLIC KEY-----\n${license.tokenPublicKeyBase64}\n-----END PUBLIC KEY-----`;
  const { payload, protectedHeader } = await jwtVerify(license.licenseToken, await importSPKI(pem, "EdDSA"), {
    currentDate: clock.now(),
  });
  t.is(protectedHeader.alg, "EdDSA");
  t.truthy(protectedHeader.kid);
  t.is(payload.ent, entitlementId);
  t.deepEqual(payload.prd, [productId]);
  t.deepEqual(payload.fea, { export: "10" });
  t.is(payload.off, true);
  t.is((payload.exp as number) - (payload.iat as number), 120);
  t.is((payload.gex as number) - (payload.exp as number), 60);
  const jwt = await activate(server.baseUrl.replace(/$/, ""), { activationCode: code, fingerprint: "laptop-2" });
  t.is(jwt.status, 200);
  t.false(
    server.logs.some((line) => line.includes(license.licenseToken)),
    "license tokens never reach the log",
  );
});

each("check-in reports standing, renew extends the lease, release frees the floating seat once", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const first = (await activate(server.baseUrl, { activationCode: code, fingerprint: "a" })).body.licenseToken;
  await activate(server.baseUrl, { activationCode: code, fingerprint: "b" });
  const third = await activate(server.baseUrl, { activationCode: code, fingerprint: "c" });
  t.is(third.status, 409);
  t.is(third.body.type, "urn:provision:problem:seat-limit-reached");

  const checkIn = await sessionCall(server.baseUrl, first, "check-in");
  t.is(checkIn.status, 200, JSON.stringify(checkIn.body));
  t.is(checkIn.body.status, 1);
  t.is(checkIn.body.sessionId, sessionIdOf(first));

  clock.advance(150_000);
  const inGrace = await sessionCall(server.baseUrl, first, "check-in");
  t.is(inGrace.body.status, 2, "lease over, grace running");
  const renewed = await sessionCall(server.baseUrl, first, "renew");
  t.is(renewed.status, 200, JSON.stringify(renewed.body));
  t.is(Date.parse(renewed.body.leaseExpiresAt), clock.now().getTime() + 120_000);
  const token = renewed.body.licenseToken;
  t.is((await sessionCall(server.baseUrl, token, "check-in")).body.status, 1);

  const released = await sessionCall(server.baseUrl, token, "release");
  t.is(released.status, 200);
  t.true(released.body.released);
  const again = await sessionCall(server.baseUrl, token, "release");
  t.deepEqual(again.body, released.body, "releasing again answers as the first release");
  const afterRelease = await sessionCall(server.baseUrl, token, "check-in");
  t.is(afterRelease.status, 401);
  t.is(afterRelease.body.type, "urn:provision:problem:session-released");
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "c" })).status, 200, "a's seat is free");
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "d" })).status, 409, "b is in grace");
  clock.advance(40_000);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "d" })).status, 200, "b has lapsed");
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "e" })).status, 409);

  const sessions = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true`);
  t.is(sessions.status, 200);
  t.deepEqual(sessions.body.items.map((item: { fingerprint: string }) => item.fingerprint).sort(), ["c", "d"]);
});

each("ListSessions shows each session's last check-in or renewal within a few seconds", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const activated = await activate(server.baseUrl, {
    activationCode: code,
    fingerprint: "seen",
    targetSoftwareVersion: "4.2",
  });
  const token = activated.body.licenseToken;
  const lastCheckIn = async () => {
    const listed = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions`);
    const [session] = listed.body.items;
    t.like(session, { fingerprint: "seen", softwareVersion: "4.2", clientAddress: "127.0.0.1" });
    return Date.parse(session.lastCheckInAt);
  };
  const reaches = async (expected: number, what: string) => {
    const deadline = Date.now() + 5_000;
    while ((await lastCheckIn()) !== expected && Date.now() < deadline) await delay(100);
    t.is(await lastCheckIn(), expected, what);
  };
  await reaches(clock.now().getTime(), "the activation");
  clock.advance(30_000);
  t.is((await sessionCall(server.baseUrl, token, "check-in")).status, 200);
  await reaches(clock.now().getTime(), "a check-in");
  clock.advance(30_000);
  t.is((await sessionCall(server.baseUrl, token, "renew")).status, 200);
  await reaches(clock.now().getTime(), "a renewal");
});

each("a session a renewal shortened is over for its older token too, on renew as on check-in", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const older = (await activate(server.baseUrl, { activationCode: code, fingerprint: "short" })).body.licenseToken;
  const shortened = await sessionCall(server.baseUrl, older, "renew", { requestedLeaseDuration: "00:00:10" });
  t.is(shortened.status, 200, JSON.stringify(shortened.body));
  clock.advance(75_000);
  for (const call of ["check-in", "renew"] as const) {
    const answer = await sessionCall(server.baseUrl, older, call);
    t.is(answer.status, 401, `${call}: ${JSON.stringify(answer.body)}`);
    t.is(answer.body.type, "urn:provision:problem:invalid-license-token", call);
  }
});

each("a token works only for its own session, and an ended session's token stops at once", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const one = (await activate(server.baseUrl, { activationCode: code, fingerprint: "x" })).body.licenseToken;
  const two = (await activate(server.baseUrl, { activationCode: code, fingerprint: "y" })).body.licenseToken;
  const crossed = await rest(
    server.baseUrl,
    "POST",
    `/api/v1/provision/activations/${sessionIdOf(two)}/check-in`,
    {},
    {
      authorization: `Bearer ${one}`,
    },
  );
  t.is(crossed.status, 403);
  const forged = await sessionCall(server.baseUrl, `${one.slice(0, -4)}AAAA`, "check-in");
  t.is(forged.status, 401);
  t.is((await sessionCall(server.baseUrl, one, "check-in")).status, 200);
  const ended = await rest(server.baseUrl, "DELETE", `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(one)}`);
  t.is(ended.status, 200, JSON.stringify(ended.body));
  t.is(ended.body.session.state, 4);
  for (const call of ["check-in", "renew", "release"] as const) {
    const refused = await sessionCall(server.baseUrl, one, call);
    t.is(refused.status, 401, call);
  }
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "z" })).status, 200, "its seat is free");
});

each("the same device activating again keeps its one seat, node-locked seats hold devices", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const policy = { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: false, isTransferableLicense: true } };
  const { code } = await entitlementWithCode(server.baseUrl, policy);
  const first = (await activate(server.baseUrl, { activationCode: code, fingerprint: "pc" })).body.licenseToken;
  const second = await activate(server.baseUrl, { activationCode: code, fingerprint: "pc" });
  t.is(second.status, 200, "the same device activates again on its seat");
  t.is((await sessionCall(server.baseUrl, first, "check-in")).status, 401, "its previous session ended");
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "other" })).status, 409);
  t.is((await sessionCall(server.baseUrl, second.body.licenseToken, "release")).status, 200);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "other" })).status, 200, "transferred");
});

each("the vendor ending a released node-locked session frees the seat its device kept", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const policy = { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: false } };
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
  const token = (await activate(server.baseUrl, { activationCode: code, fingerprint: "old-pc" })).body.licenseToken;
  t.is((await sessionCall(server.baseUrl, token, "release")).status, 200);
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "new-pc" })).status,
    409,
    "not transferable",
  );
  const ended = await rest(server.baseUrl, "DELETE", `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(token)}`);
  t.is(ended.status, 200, JSON.stringify(ended.body));
  const moved = await activate(server.baseUrl, { activationCode: code, fingerprint: "new-pc" });
  t.is(moved.status, 200, "the seat came back");

  const again = await activate(server.baseUrl, { activationCode: code, fingerprint: "new-pc" });
  t.is((await sessionCall(server.baseUrl, moved.body.licenseToken, "check-in")).status, 401, "replaced");
  const replaced = await rest(
    server.baseUrl,
    "DELETE",
    `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(moved.body.licenseToken)}`,
  );
  t.is(replaced.status, 200);
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "third-pc" })).status,
    409,
    "ending a replaced session leaves the seat to the device's live session",
  );
  t.is((await sessionCall(server.baseUrl, again.body.licenseToken, "check-in")).status, 200);

  t.is((await sessionCall(server.baseUrl, again.body.licenseToken, "release")).status, 200);
  const endedAgain = await rest(
    server.baseUrl,
    "DELETE",
    `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(moved.body.licenseToken)}`,
  );
  t.is(endedAgain.status, 200);
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "third-pc" })).status,
    409,
    "ending a replaced session changes nothing: the device's released session still keeps its seat",
  );
  const endedReleased = await rest(
    server.baseUrl,
    "DELETE",
    `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(again.body.licenseToken)}`,
  );
  t.is(endedReleased.status, 200);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "third-pc" })).status, 200);
});

each("revocation and activation-disabled show at the next check-in, renew and activation", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const token = (await activate(server.baseUrl, { activationCode: code, fingerprint: "r" })).body.licenseToken;
  t.is((await sessionCall(server.baseUrl, token, "check-in")).body.status, 1);
  const disabled = await rest(
    server.baseUrl,
    "PUT",
    `/api/v1/provision/operational/entitlement/entitlements/${entitlementId}/activation-enabled/false`,
  );
  t.is(disabled.status, 200);
  const refused = await activate(server.baseUrl, { activationCode: code, fingerprint: "s" });
  t.is(refused.status, 403);
  t.is(refused.body.type, "urn:provision:problem:activation-disabled");
  t.is((await sessionCall(server.baseUrl, token, "check-in")).body.status, 1, "running sessions keep working");
  t.is((await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, { isRevoked: true })).status, 200);
  const checkIn = await sessionCall(server.baseUrl, token, "check-in");
  t.is(checkIn.body.status, 5);
  t.true(checkIn.body.isRevoked);
  const renew = await sessionCall(server.baseUrl, token, "renew");
  t.is(renew.status, 403);
});

each("activation refuses bad input with 400 and an unknown code with 404", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const missing = await activate(server.baseUrl, { activationCode: "", fingerprint: "" });
  t.is(missing.status, 400);
  t.deepEqual(missing.body.errors.map((error: { field: string }) => error.field).sort(), [
    "activationCode",
    "fingerprint",
  ]);
  t.is((await activate(server.baseUrl, { activationCode: "!!", fingerprint: "f" })).status, 400);
  const unknown = await activate(server.baseUrl, { activationCode: "ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ", fingerprint: "f" });
  t.is(unknown.status, 404);
  t.is((await activate(server.baseUrl, { activationCode: "ABCD", fingerprint: "x".repeat(513) })).status, 400);
});

each(
  "after the provider's key is rotated, renew answers the new token with the key that verifies it",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const { code } = await entitlementWithCode(server.baseUrl, FLOATING);
    const first = (await activate(server.baseUrl, { activationCode: code, fingerprint: "rotating" })).body;
    const providerId = licenseClaimsOf(first.licenseToken).iss.split(":").at(-1);
    await new LicenseKeys(server.app.dataSource, clock, undefined).rotate(providerId);
    clock.advance(ACTIVE_KEY_REFRESH_MS + 1000);
    const renewed = await sessionCall(server.baseUrl, first.licenseToken, "renew");
    t.is(renewed.status, 200, JSON.stringify(renewed.body));
    t.not(renewed.body.tokenPublicKeyBase64, first.tokenPublicKeyBase64);
    const verify = async (token: string, key: string) => {
      const pem = `-----BEGIN PUBLIC KEY-----\n${key}\n-----END PUBLIC KEY-----`;
      return jwtVerify(token, await importSPKI(pem, "EdDSA"), { currentDate: clock.now() });
    };
    t.truthy(await verify(renewed.body.licenseToken, renewed.body.tokenPublicKeyBase64));
    await t.throwsAsync(verify(renewed.body.licenseToken, first.tokenPublicKeyBase64));
  },
);
