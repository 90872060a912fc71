import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import {
  activate,
  codesPath,
  ENTITLEMENTS,
  entitlementWithCode,
  licenseClaimsOf,
  sessionCall,
} from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { createProviderWithClient } from "../support/providers.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// Each policy rule of activation, through the HTTP path on both databases. The rules themselves are unit-tested
// at their boundaries (test/unit/activation-rules.test.ts); these show the service applies them.

interface Context {
  servers: Record<string, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const HOUR = 3_600_000;

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-policies-"));
  t.context.servers = {};
  for (const mode of MODES) {
    const clock = manualClock(Date.now());
    const server = await startTestServer({
      clock,
      // The clock moves some 12 hours over these tests: the admin token outlives them.
      env: { ACCESS_TOKEN_TTL_SECONDS: "86400" },
      ...(mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {}),
    });
    t.context.servers[mode] = { server, clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

const iso = (ms: number) => new Date(ms).toISOString();
const SEATS = { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true } };

/** SEATS with a trial of `trialPeriod` counted from the entitlement's first activation. */
function trialFromFirstActivation(trialPeriod: string, more: Record<string, unknown> = {}) {
  return { ...SEATS, trialActivationPolicy: { trialPeriod, trialPeriodStartsAfterFirstActivation: true, ...more } };
}

function refused(t: ExecutionContext<Context>, answer: { status: number; body: any }, status: number, slug: string) {
  t.is(answer.status, status, JSON.stringify(answer.body));
  t.is(answer.body.type, `urn:provision:problem:${slug}`);
}

each("a deleted code and an expired code answer 404", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, SEATS);
  const codes = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
  const deleted = await rest(
    server.baseUrl,
    "DELETE",
    `${ENTITLEMENTS}/${entitlementId}/activation-codes/${codes.body.items[0].id}`,
  );
  t.is(deleted.status, 200);
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "d" }), 404, "code-deleted");

  const expiring = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
    expirationTimeStamp: iso(clock.now().getTime() + HOUR),
    useEntitlementMaxActivations: true,
  });
  t.is(
    (await activate(server.baseUrl, { activationCode: expiring.body.activationCode, fingerprint: "e" })).status,
    200,
  );
  clock.advance(HOUR);
  refused(
    t,
    await activate(server.baseUrl, { activationCode: expiring.body.activationCode, fingerprint: "f" }),
    404,
    "code-expired",
  );
});

each("an expired entitlement refuses activation, and caps the lease of one before it", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const expiresAt = clock.now().getTime() + 2 * HOUR;
  const { code } = await entitlementWithCode(server.baseUrl, SEATS, undefined, { expirationDateTime: iso(expiresAt) });
  const answer = await activate(server.baseUrl, { activationCode: code, fingerprint: "a" });
  t.is(answer.status, 200);
  const payload = licenseClaimsOf(answer.body.licenseToken);
  t.is(payload.exp, Math.floor(expiresAt / 1000), "the 30-day default lease ends with the entitlement");
  clock.advance(2 * HOUR);
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "b" }), 403, "entitlement-expired");
  const checkIn = await sessionCall(server.baseUrl, answer.body.licenseToken, "check-in");
  t.is(checkIn.status, 401, "the token's grace ended with the entitlement");
});

each("a time window refuses activation before and after it", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const now = clock.now().getTime();
  const policy = {
    ...SEATS,
    timeRestrictedActivationPolicy: {
      notValidBeforeTimestamp: iso(now + HOUR),
      notValidAfterTimestamp: iso(now + 3 * HOUR),
    },
  };
  const { code } = await entitlementWithCode(server.baseUrl, policy);
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "a" }), 403, "not-yet-valid");
  clock.advance(HOUR);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "a" })).status, 200);
  clock.advance(2 * HOUR);
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "b" }), 403, "validity-window-ended");
});

each("a trial counted from the first activation ends trialPeriod after it", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const policy = trialFromFirstActivation("01:00:00");
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy, undefined, { isTrial: true });
  clock.advance(5 * HOUR);
  const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "a" });
  t.is(first.status, 200, JSON.stringify(first.body));
  const entitlement = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}`);
  t.is(Date.parse(entitlement.body.activationPolicy.trialActivationPolicy.trialEndsAt), clock.now().getTime() + HOUR);
  const checkIn = await sessionCall(server.baseUrl, first.body.licenseToken, "check-in");
  t.true(checkIn.body.isEntitlementTrial);
  clock.advance(HOUR);
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "b" }), 403, "trial-ended");
});

each("check-in reports the trial's end: its period's or its notValidAfterTimestamp, the earlier", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const windowEnd = clock.now().getTime() + 2 * HOUR;
  const policy = trialFromFirstActivation("10:00:00", { notValidAfterTimestamp: iso(windowEnd) });
  const { code } = await entitlementWithCode(server.baseUrl, policy, undefined, { isTrial: true });
  const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "a" });
  const checkIn = await sessionCall(server.baseUrl, first.body.licenseToken, "check-in");
  t.is(Date.parse(checkIn.body.trialEndsAt), windowEnd);
});

each("spans reaching past the year 9999 end there instead of failing", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const latest = Date.parse("9999-12-31T23:59:59.999Z");
  const trial = { ...SEATS, trialActivationPolicy: { trialPeriod: "3000000.00:00:00" } };
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, trial, undefined, { isTrial: true });
  const stored = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}`);
  t.is(Date.parse(stored.body.activationPolicy.trialActivationPolicy.trialEndsAt), latest);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "a" })).status, 200);
  const longLease = {
    claimBasedActivation: {
      ...SEATS.claimBasedActivation,
      leaseTime: "2920000.00:00:00",
      gracePeriod: "3000000.00:00:00",
    },
  };
  const leased = await entitlementWithCode(server.baseUrl, longLease);
  const answer = await activate(server.baseUrl, { activationCode: leased.code, fingerprint: "b" });
  t.is(answer.status, 200, JSON.stringify(answer.body));
  const claims = licenseClaimsOf(answer.body.licenseToken);
  t.is(claims.exp, Math.floor(latest / 1000));
  t.is(claims.gex, Math.floor(latest / 1000));
  t.is((await sessionCall(server.baseUrl, answer.body.licenseToken, "renew")).status, 200);
});

each("a trial's notValidAfterTimestamp moved later once the trial started still moves its end", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const at = (ms: number) => new Date(clock.now().getTime() + ms).toISOString();
  const trialPolicy = (notValidAfterTimestamp: string) =>
    trialFromFirstActivation("10:00:00", { notValidAfterTimestamp });
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, trialPolicy(at(2 * HOUR)), undefined, {
    isTrial: true,
  });
  const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "a" });
  t.is(first.status, 200, JSON.stringify(first.body));
  t.is(licenseClaimsOf(first.body.licenseToken).exp, Math.floor((clock.now().getTime() + 2 * HOUR) / 1000));
  const stored = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}`);
  const trialEndsAt = Date.parse(stored.body.activationPolicy.trialActivationPolicy.trialEndsAt);
  t.is(trialEndsAt, clock.now().getTime() + 10 * HOUR, "the trial period's end, not the window's");
  const moved = await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, {
    activationPolicy: trialPolicy(at(5 * HOUR)),
  });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  const renewed = await sessionCall(server.baseUrl, first.body.licenseToken, "renew");
  t.is(renewed.status, 200, JSON.stringify(renewed.body));
  t.is(licenseClaimsOf(renewed.body.licenseToken).exp, Math.floor((clock.now().getTime() + 5 * HOUR) / 1000));
});

each(
  "a trial code's trial counted from the first activation counts from another code's earlier one",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const policy = trialFromFirstActivation("10:00:00");
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
    const firstAt = clock.now().getTime();
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "paid" })).status, 200);
    clock.advance(4 * HOUR);
    const trialCode = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
      isTrialActivation: true,
      useEntitlementMaxActivations: true,
    });
    const trial = await activate(server.baseUrl, { activationCode: trialCode.body.activationCode, fingerprint: "t" });
    t.is(trial.status, 200, JSON.stringify(trial.body));
    t.is(licenseClaimsOf(trial.body.licenseToken).exp, Math.floor((firstAt + 10 * HOUR) / 1000));
    const stored = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}`);
    t.is(Date.parse(stored.body.activationPolicy.trialActivationPolicy.trialEndsAt), firstAt + 10 * HOUR);
    const renewed = await sessionCall(server.baseUrl, trial.body.licenseToken, "renew");
    t.is(licenseClaimsOf(renewed.body.licenseToken).exp, Math.floor((firstAt + 10 * HOUR) / 1000));
  },
);

each("an inactive subscription refuses activation unless enforcement is soft, which reports grace", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const hard = {
    ...SEATS,
    subscriptionPolicy: { renewPeriod: "month", isSubscriptionActive: false, subscriptionPeriodsLeft: -1 },
  };
  const blocked = await entitlementWithCode(server.baseUrl, hard);
  refused(
    t,
    await activate(server.baseUrl, { activationCode: blocked.code, fingerprint: "a" }),
    403,
    "subscription-inactive",
  );
  const soft = { ...SEATS, subscriptionPolicy: { ...hard.subscriptionPolicy, softEnforcement: true } };
  const warned = await entitlementWithCode(server.baseUrl, soft);
  const answer = await activate(server.baseUrl, { activationCode: warned.code, fingerprint: "a" });
  t.is(answer.status, 200);
  t.deepEqual(licenseClaimsOf(answer.body.licenseToken).fea, {}, "in grace: only features available during it");
  const checkIn = await sessionCall(server.baseUrl, answer.body.licenseToken, "check-in");
  t.is(checkIn.body.status, 2);
  t.false(checkIn.body.isSubscriptionActive);
  const activeAgain = await rest(
    server.baseUrl,
    "PUT",
    `/api/v1/provision/operational/entitlement/entitlements/${warned.entitlementId}/policies/subscription/active`,
    { isSubscriptionActive: true },
  );
  t.is(activeAgain.status, 200);
  t.is(
    (await sessionCall(server.baseUrl, answer.body.licenseToken, "check-in")).body.status,
    1,
    "seen at the next check-in",
  );
  const renewed = await sessionCall(server.baseUrl, answer.body.licenseToken, "renew");
  t.deepEqual(licenseClaimsOf(renewed.body.licenseToken).fea, { export: "10" }, "active again: every feature");
});

each("level 2 needs the invitation's email, case-insensitively", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { code } = await entitlementWithCode(server.baseUrl, SEATS, {
    requiredAuthenticationLevel: 2,
    email: "Ada@Example.com",
    useEntitlementMaxActivations: true,
  });
  refused(
    t,
    await activate(server.baseUrl, { activationCode: code, fingerprint: "a", email: "eve@example.com" }),
    403,
    "email-mismatch",
  );
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "a", email: "ada@example.COM" })).status,
    200,
  );
});

each("a code issued without an email, before the policy came to ask for level 2, is told apart", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { code, entitlementId } = await entitlementWithCode(server.baseUrl, SEATS);
  const raised = await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, {
    activationPolicy: { ...SEATS, requiredAuthenticationLevel: 2 },
  });
  t.is(raised.status, 200, JSON.stringify(raised.body));
  const answer = await activate(server.baseUrl, { activationCode: code, fingerprint: "a", email: "ada@example.com" });
  refused(t, answer, 403, "code-without-email");
  t.regex(answer.body.detail, /new code/);
});

each("requireProductCode needs the activating software to be one of the products", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { code, productId } = await entitlementWithCode(server.baseUrl, { ...SEATS, requireProductCode: true });
  const product = await rest(server.baseUrl, "GET", `/api/v1/provision/admin/assets/products/${productId}`);
  refused(
    t,
    await activate(server.baseUrl, { activationCode: code, fingerprint: "a", targetSoftwareVersion: "OTHER:1" }),
    403,
    "product-code-required",
  );
  const own = `${product.body.productCode}:${product.body.productVersion}`;
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "a", targetSoftwareVersion: own })).status,
    200,
  );
});

each("pre-authorized devices bind the code to them", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { code } = await entitlementWithCode(server.baseUrl, SEATS, {
    preAuthorizedDevices: ["lab-1", "lab-2"],
    maxDeviceActivations: 2,
  });
  refused(
    t,
    await activate(server.baseUrl, { activationCode: code, fingerprint: "home" }),
    403,
    "device-not-authorized",
  );
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "lab-2" })).status, 200);
});

each("a code's pre-authorized devices may each activate when it sets no device limit of its own", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, SEATS, {
    preAuthorizedDevices: ["lab-1", "lab-2", "lab-3", "lab-2"],
  });
  for (const fingerprint of ["lab-3", "lab-1", "lab-2"]) {
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint })).status, 200, fingerprint);
  }
  const listed = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
  t.is(listed.body.items[0].maxDeviceActivations, 3);
});

each("consent: refused until the request accepts the license terms, then recorded on the code", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, SEATS, {
    requiresUserConsent: true,
    useEntitlementMaxActivations: true,
  });
  refused(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "a" }), 403, "consent-required");
  t.is(
    (await activate(server.baseUrl, { activationCode: code, fingerprint: "a", acceptLicenseTerms: true })).status,
    200,
  );
  const codes = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
  t.true(codes.body.items[0].userConsent);
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "b" })).status, 200, "given once per code");
});

each("a template never activates", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId } = await entitlementWithCode(server.baseUrl, SEATS);
  const template = await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
    entitlementId,
    templateName: `tpl-${mode}-${Date.now()}`,
  });
  t.is(template.status, 200);
  const code = await rest(server.baseUrl, "POST", codesPath(template.body.id), {});
  refused(t, code, 409, "template-not-activatable");
});

each("another provider's entitlement, codes and sessions answer 404", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, SEATS);
  const token = (await activate(server.baseUrl, { activationCode: code, fingerprint: "a" })).body.licenseToken;
  const sessionId = licenseClaimsOf(token).sid;
  const other = await createProviderWithClient(server);
  const authorization = `Bearer ${await accessToken(server.baseUrl, other.clientId, other.clientSecret)}`;
  for (const [method, suffix] of [
    ["GET", "/sessions"],
    ["DELETE", `/sessions/${sessionId}`],
    ["GET", "/activation-codes"],
  ] as const) {
    const answer = await rest(server.baseUrl, method, `${ENTITLEMENTS}/${entitlementId}${suffix}`, undefined, {
      authorization,
    });
    t.is(answer.status, 404, `${method} ${suffix}`);
  }
  t.is((await sessionCall(server.baseUrl, token, "check-in")).status, 200, "the session was not touched");
});

each(
  "a trial code makes a trial license on a paid entitlement: trial claim, lease ending with the trial",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const policy = trialFromFirstActivation("01:00:00");
    const { entitlementId } = await entitlementWithCode(server.baseUrl, policy);
    const trialCode = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
      isTrialActivation: true,
      useEntitlementMaxActivations: true,
    });
    const trial = await activate(server.baseUrl, { activationCode: trialCode.body.activationCode, fingerprint: "t" });
    t.is(trial.status, 200, JSON.stringify(trial.body));
    const claims = licenseClaimsOf(trial.body.licenseToken);
    t.true(claims.trl);
    t.is(claims.exp, Math.floor((clock.now().getTime() + HOUR) / 1000));
    const checkIn = await sessionCall(server.baseUrl, trial.body.licenseToken, "check-in");
    t.is(checkIn.body.status, 1);
  },
);
