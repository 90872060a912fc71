import { randomUUID } from "node:crypto";
import dns from "node:dns/promises";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { type CryptoKey, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { ClientHostNames, hostAllowed } from "../../src/licensing/client-host-names.js";
import { ACTIVATE, codesPath, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const ISSUER = "https://login.test/realms/customers";
const AUDIENCE = "provision-activation";
const KID = "user-key-1";

interface Signer {
  key: CryptoKey;
  alg: string;
  kid: string;
}

interface Context {
  servers: Record<Mode, { server: TestServer; clock: ManualClock }>;
  /** Interactive activation configured against a key set that answers 500. */
  brokenIssuer: TestServer;
  /** No USER_TOKEN_* configured. */
  unconfigured: TestServer;
  jwks: http.Server;
  failingJwks: http.Server;
  /** Fetches the failing key set has answered (an object: each test's context is a copy of the hook's). */
  failedFetches: { count: number };
  /** The key set the issuer publishes: a test may add a key. */
  published: { keys: Record<string, unknown>[] };
  signer: Signer;
  /** A key the issuer does not publish. */
  stranger: Signer;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks` };
}

const userTokenEnv = (jwksUrl: string) => ({
  USER_TOKEN_ISSUER: ISSUER,
  USER_TOKEN_JWKS_URL: jwksUrl,
  USER_TOKEN_AUDIENCE: AUDIENCE,
});

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-interactive-"));
  const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
  t.context.signer = { key: privateKey, alg: "RS256", kid: KID };
  t.context.stranger = { key: (await generateKeyPair("ES256")).privateKey, alg: "ES256", kid: KID };
  const published = { keys: [{ ...(await exportJWK(publicKey)), kid: KID, alg: "RS256", use: "sig" }] };
  t.context.published = published;
  const failedFetches = { count: 0 };
  t.context.failedFetches = failedFetches;
  const jwks = await listen((_request, response) => {
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(published));
  });
  const failing = await listen((_request, response) => {
    failedFetches.count++;
    response.writeHead(500).end("down");
  });
  t.context.jwks = jwks.server;
  t.context.failingJwks = failing.server;
  t.context.servers = {} as Context["servers"];
  for (const mode of MODES) {
    const clock = manualClock(Date.now());
    const server = await startTestServer({
      clock,
      env: userTokenEnv(jwks.url),
      ...(mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {}),
    });
    t.context.servers[mode] = { server, clock };
  }
  t.context.brokenIssuer = await startTestServer({
    env: userTokenEnv(failing.url),
    embedded: { file: path.join(t.context.folder, "broken.sqlite") },
  });
  t.context.unconfigured = await startTestServer({ embedded: { file: path.join(t.context.folder, "plain.sqlite") } });
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  await t.context.brokenIssuer?.close();
  await t.context.unconfigured?.close();
  t.context.jwks?.close();
  t.context.failingJwks?.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** A user token as the issuer signs it, valid for ten minutes from `now`; `claims` may replace any claim. */
function userToken(signer: Signer, now: Date, sub: string, claims: JWTPayload = {}): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub, iat, exp: iat + 600, ...claims })
    .setProtectedHeader({ alg: signer.alg, kid: signer.kid })
    .sign(signer.key);
}

function activateAs(server: TestServer, token: string | null, body: Record<string, unknown>) {
  return rest(server.baseUrl, "POST", ACTIVATE, body, { authorization: token === null ? "" : `Bearer ${token}` });
}

const codesOf = (entitlementId: string) => `${ENTITLEMENTS}/${entitlementId}/activation-codes`;

const problemSlug = (body: { type?: string }) => body.type?.replace("urn:provision:problem:", "");

/** An entitlement whose code invites `invitee` (`userId` or `organizationGroupId`) at level 3. */
function invitation(server: TestServer, invitee: Record<string, string>, policy: Record<string, unknown> = {}) {
  return entitlementWithCode(server.baseUrl, policy, {
    requiredAuthenticationLevel: 3,
    useEntitlementMaxActivations: true,
    ...invitee,
  });
}

each("a level-3 code activates for its invitee's token only; without a token it answers 401", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const body = { activationCode: code, fingerprint: "laptop-1", useInteractiveUser: true };

  const anonymous = await activateAs(server, null, body);
  t.is(anonymous.status, 403, JSON.stringify(anonymous.body));
  t.is(problemSlug(anonymous.body), "authentication-required");
  t.regex(anonymous.headers.get("www-authenticate") ?? "", /^Bearer /);

  const other = await activateAs(server, await userToken(t.context.signer, clock.now(), randomUUID()), body);
  t.is(other.status, 403);
  t.is(problemSlug(other.body), "user-not-invited");

  const token = await userToken(t.context.signer, clock.now(), user.toUpperCase());
  const invited = await activateAs(server, token, body);
  t.is(invited.status, 200, JSON.stringify(invited.body));
  t.truthy(invited.body.licenseToken);
  t.false(
    server.logs.some((line) => line.includes(token)),
    "user tokens never reach the log",
  );
});

each("a member of the invited group activates through the token's groups claim", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const group = randomUUID();
  const { code } = await invitation(server, { organizationGroupId: group });
  const body = { activationCode: code, fingerprint: "desk-1", useInteractiveUser: true };
  const outsider = await userToken(t.context.signer, clock.now(), randomUUID(), { groups: [randomUUID()] });
  t.is(problemSlug((await activateAs(server, outsider, body)).body), "user-not-invited");
  const notAList = await userToken(t.context.signer, clock.now(), randomUUID(), { groups: group });
  t.is(problemSlug((await activateAs(server, notAList, body)).body), "user-not-invited", "groups must be an array");
  const member = await userToken(t.context.signer, clock.now(), randomUUID(), { groups: ["staff", group, 7] });
  const answer = await activateAs(server, member, body);
  t.is(answer.status, 200, JSON.stringify(answer.body));
});

each("a bearer token sent without useInteractiveUser signs the user in for a level-3 code", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const body = { activationCode: code, fingerprint: "box-1" };
  t.is(problemSlug((await activateAs(server, null, body)).body), "authentication-required");
  const answer = await activateAs(server, await userToken(t.context.signer, clock.now(), user), body);
  t.is(answer.status, 200, JSON.stringify(answer.body));
  const stranger = await activateAs(server, await userToken(t.context.signer, clock.now(), randomUUID()), body);
  t.is(problemSlug(stranger.body), "user-not-invited");
});

each("requireOrganizationGroupMember signs the user in and asks for the group at any level", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const group = randomUUID();
  const { code } = await entitlementWithCode(server.baseUrl, { requireOrganizationGroupMember: group });
  const body = { activationCode: code, fingerprint: "lab-1" };
  t.is(problemSlug((await activateAs(server, null, body)).body), "authentication-required");
  const outsider = await userToken(t.context.signer, clock.now(), randomUUID(), { groups: [randomUUID()] });
  t.is(problemSlug((await activateAs(server, outsider, body)).body), "organization-group-required");
  const member = await userToken(t.context.signer, clock.now(), randomUUID(), { groups: [group] });
  t.is((await activateAs(server, member, body)).status, 200);
});

each("useInteractiveUser holds a level-1 code to its invitee too", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await entitlementWithCode(server.baseUrl, {}, { useEntitlementMaxActivations: true, userId: user });
  const body = { activationCode: code, fingerprint: "pc-1", useInteractiveUser: true };
  const other = await activateAs(server, await userToken(t.context.signer, clock.now(), randomUUID()), body);
  t.is(problemSlug(other.body), "user-not-invited");
  t.is((await activateAs(server, await userToken(t.context.signer, clock.now(), user), body)).status, 200);
  t.is((await activateAs(server, null, { ...body, useInteractiveUser: false })).status, 200, "plain level 1 still");
});

each("useInteractiveUser does not lift a level-2 code's email check", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const { code } = await entitlementWithCode(
    server.baseUrl,
    { requiredAuthenticationLevel: 2 },
    { useEntitlementMaxActivations: true, email: "alice@customer.example" },
  );
  const anyone = await userToken(t.context.signer, clock.now(), randomUUID());
  const body = { activationCode: code, fingerprint: "m-1", useInteractiveUser: true };
  const otherEmail = await activateAs(server, anyone, { ...body, email: "mallory@evil.example" });
  t.is(otherEmail.status, 403, JSON.stringify(otherEmail.body));
  t.is(problemSlug(otherEmail.body), "email-mismatch");
  t.is(problemSlug((await activateAs(server, anyone, body)).body), "email-mismatch", "no email at all");
  const alice = await activateAs(server, anyone, { ...body, email: "Alice@customer.example" });
  t.is(alice.status, 200, JSON.stringify(alice.body));
});

each("expired, wrong-audience, wrong-issuer, tampered and foreign-key tokens answer 401", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const body = { activationCode: code, fingerprint: "tablet-1", useInteractiveUser: true };
  const now = clock.now();
  const nowSeconds = Math.floor(now.getTime() / 1000);
  const valid = await userToken(t.context.signer, now, user);
  const [header, payload, signature] = valid.split(".");
  const forged = Buffer.from(
    JSON.stringify({ ...JSON.parse(Buffer.from(payload, "base64url").toString()), sub: randomUUID() }),
  ).toString("base64url");
  const refused = {
    expired: await userToken(t.context.signer, now, user, { iat: nowSeconds - 900, exp: nowSeconds - 300 }),
    "wrong audience": await userToken(t.context.signer, now, user, { aud: "someone-else" }),
    "wrong issuer": await userToken(t.context.signer, now, user, { iss: "https://evil.test" }),
    tampered: `${header}.${forged}.${signature}`,
    "foreign key": await userToken(t.context.stranger, now, user),
    "no exp": await userToken(t.context.signer, now, user, { exp: undefined }),
    "no sub": await userToken(t.context.signer, now, ""),
    "not a JWT": "not-a-jwt",
  };
  for (const [what, token] of Object.entries(refused)) {
    const answer = await activateAs(server, token, body);
    t.is(answer.status, 401, `${what}: ${JSON.stringify(answer.body)}`);
    t.is(problemSlug(answer.body), "invalid-user-token", what);
    t.regex(answer.headers.get("www-authenticate") ?? "", /error="invalid_token"/, what);
    t.false(JSON.stringify(answer.body).includes(token), `${what}: the token is not echoed`);
  }
  t.is((await activateAs(server, valid, body)).status, 200, "the untampered token still works");
  clock.advance(601_000);
  t.is(
    problemSlug((await activateAs(server, valid, body)).body),
    "invalid-user-token",
    "expired by the server's clock",
  );
});

each(
  "without a code: the user's one entitlement activates with its newest code; two → 400; none → 404",
  async (t, mode) => {
    const { server, clock } = t.context.servers[mode];
    const user = randomUUID();
    const group = randomUUID();
    const body = { fingerprint: "phone-1", useInteractiveUser: true };
    const signIn = (claims: JWTPayload = {}) => userToken(t.context.signer, clock.now(), user, claims);

    const none = await activateAs(server, await signIn(), body);
    t.is(none.status, 404, JSON.stringify(none.body));
    t.is(problemSlug(none.body), "code-not-found");
    t.is((await activateAs(server, null, body)).status, 403, "a code left out needs the user's token");

    const { entitlementId } = await invitation(server, { userId: user });
    clock.advance(1000);
    const newer = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
      requiredAuthenticationLevel: 3,
      userId: user,
      useEntitlementMaxActivations: true,
    });
    t.is(newer.status, 200);
    // Neither a deleted code nor a revoked entitlement counts as a second entitlement.
    const deleted = await invitation(server, { userId: user });
    const [deletedCode] = (await rest(server.baseUrl, "GET", codesOf(deleted.entitlementId))).body.items;
    t.is((await rest(server.baseUrl, "DELETE", `${codesOf(deleted.entitlementId)}/${deletedCode.id}`)).status, 200);
    const revoked = await invitation(server, { organizationGroupId: group });
    t.is(
      (await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${revoked.entitlementId}`, { isRevoked: true })).status,
      200,
    );

    const one = await activateAs(server, await signIn({ groups: [group] }), body);
    t.is(one.status, 200, JSON.stringify(one.body));
    const codes = (await rest(server.baseUrl, "GET", codesOf(entitlementId))).body.items as Record<string, unknown>[];
    const used = codes.find((code) => code.activationCodeUseCount === 1);
    t.is(used?.id, newer.body.id, "the newest code of the entitlement is used");

    await invitation(server, { organizationGroupId: randomUUID() }); // another group's: not the user's
    const viaGroup = await invitation(server, { organizationGroupId: group.toUpperCase() });
    const two = await activateAs(server, await signIn({ groups: [group.toUpperCase()] }), body);
    t.is(two.status, 400, JSON.stringify(two.body));
    t.is(problemSlug(two.body), "activation-code-required");
    t.false(JSON.stringify(two.body).includes(viaGroup.code), "no code is listed");
    t.false(JSON.stringify(two.body).includes(viaGroup.entitlementId), "no entitlement is listed");
    t.is((await activateAs(server, await signIn(), body)).status, 200, "without the group: one entitlement again");
  },
);

each("a code left out is refused when the entitlement requires the activation workflow", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user }, { requireActivationWorkflow: true });
  const token = await userToken(t.context.signer, clock.now(), user);
  const answer = await activateAs(server, token, { fingerprint: "kiosk-1", useInteractiveUser: true });
  t.is(answer.status, 403, JSON.stringify(answer.body));
  t.is(problemSlug(answer.body), "activation-workflow-required");
  const withCode = { activationCode: code, fingerprint: "kiosk-1", useInteractiveUser: true };
  t.is((await activateAs(server, token, withCode)).status, 200);
});

each("interactive activation over Connect reads the user's token from the request headers", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const call = async (authorization: string | null) => {
    const response = await fetch(`${server.baseUrl}/provision.v1.ActivationService/ActivateLicense`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
      body: JSON.stringify({ activationCode: code, fingerprint: "rpc-1", useInteractiveUser: true }),
    });
    return { status: response.status, body: (await response.json()) as { license: { licenseToken: string } } };
  };
  t.is((await call(null)).status, 403, "Connect's permission_denied");
  const answer = await call(`Bearer ${await userToken(t.context.signer, clock.now(), user)}`);
  t.is(answer.status, 200, JSON.stringify(answer.body));
  t.truthy(answer.body.license.licenseToken);
});

each("requireAclHostNameMember admits the caller's reverse-DNS name and refuses the rest", async (t, mode) => {
  const { server } = t.context.servers[mode];
  // The test server sees its client as 127.0.0.1; what this machine's resolver names it varies.
  const names = await dns.reverse("127.0.0.1");
  t.true(names.length > 0, "this machine names 127.0.0.1 in reverse DNS");
  const allowed = await entitlementWithCode(server.baseUrl, {
    requireAclHostNameMember: ["build.example.invalid", names[0].toUpperCase()],
  });
  const admitted = await activateAs(server, null, { activationCode: allowed.code, fingerprint: "host-1" });
  t.is(admitted.status, 200, JSON.stringify(admitted.body));
  const elsewhere = await entitlementWithCode(server.baseUrl, {
    requireAclHostNameMember: ["*.example.invalid", `${names[0]}.example.invalid`],
  });
  const refused = await activateAs(server, null, { activationCode: elsewhere.code, fingerprint: "host-1" });
  t.is(refused.status, 403, JSON.stringify(refused.body));
  t.is(problemSlug(refused.body), "host-not-allowed");
});

test("host names match exactly or under a `*.domain`, case-insensitively", (t) => {
  t.true(hostAllowed(["Build-1.Example.com."], ["build-1.example.com"]));
  t.true(hostAllowed(["*.example.com"], ["a.b.example.com"]));
  t.false(hostAllowed(["*.example.com"], ["example.com"]), "the wildcard needs a label in front");
  t.false(hostAllowed(["*.example.com"], ["badexample.com"]));
  t.false(hostAllowed(["example.com"], ["www.example.com"]));
  t.false(hostAllowed(["example.com"], []), "no reverse name, no match");
});

test("reverse lookups are cached briefly; failures and timeouts give no names", async (t) => {
  const clock = manualClock();
  const asked: string[] = [];
  const answers: Record<string, () => Promise<string[]>> = {
    "192.0.2.1": async () => ["a.example.com"],
    "192.0.2.2": () => Promise.reject(Object.assign(new Error("no PTR"), { code: "ENOTFOUND" })),
    "192.0.2.3": () => new Promise(() => {}),
  };
  const names = new ClientHostNames(clock, (address) => {
    asked.push(address);
    return answers[address]();
  });
  t.is(names.cached("192.0.2.1"), undefined);
  t.deepEqual(await names.resolve("192.0.2.1"), ["a.example.com"]);
  t.deepEqual(names.cached("192.0.2.1"), ["a.example.com"]);
  t.deepEqual(await names.resolve("192.0.2.2"), []);
  const started = Date.now();
  t.deepEqual(await names.resolve("192.0.2.3"), []);
  t.true(Date.now() - started < 3000, "a lookup that never answers times out");
  t.deepEqual(await names.resolve("unknown"), [], "not an address: no lookup");
  t.deepEqual(asked, ["192.0.2.1", "192.0.2.2", "192.0.2.3"]);
  clock.advance(61_000);
  t.is(names.cached("192.0.2.1"), undefined, "expired after a minute");
  await names.resolve("192.0.2.1");
  t.is(asked.length, 4);
});

test("without USER_TOKEN_* configured, interactive activation answers 403 interactive-user-not-configured", async (t) => {
  const server = t.context.unconfigured;
  const { code } = await invitation(server, { userId: randomUUID() });
  for (const body of [
    { activationCode: code, fingerprint: "f-1", useInteractiveUser: true },
    { fingerprint: "f-1", useInteractiveUser: true },
    { activationCode: code, fingerprint: "f-1" },
  ]) {
    const answer = await activateAs(server, null, body);
    t.is(answer.status, 403, JSON.stringify(answer.body));
    t.is(problemSlug(answer.body), "interactive-user-not-configured");
  }
  const plain = await entitlementWithCode(server.baseUrl, {});
  t.is((await activateAs(server, null, { activationCode: plain.code, fingerprint: "f-1" })).status, 200);
});

test("a key set that cannot be fetched answers 503, not a verdict on the token", async (t) => {
  const server = t.context.brokenIssuer;
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const token = await userToken(t.context.signer, new Date(), user);
  const answer = await activateAs(server, token, {
    activationCode: code,
    fingerprint: "f-1",
    useInteractiveUser: true,
  });
  t.is(answer.status, 503, JSON.stringify(answer.body));
  t.is(problemSlug(answer.body), "user-token-issuer-unavailable");
  t.is(answer.headers.get("retry-after"), "5");
  t.false(
    server.logs.some((line) => line.includes(token)),
    "the token is not logged",
  );
  const fetches = t.context.failedFetches.count;
  for (let again = 0; again < 5; again++) {
    const retried = await activateAs(server, token, {
      activationCode: code,
      fingerprint: "f-1",
      useInteractiveUser: true,
    });
    t.is(retried.status, 503);
  }
  t.is(t.context.failedFetches.count, fetches, "asked again within Retry-After, the key set is not fetched again");
  t.true(fetches > 0);
});

each("a key the issuer has just added answers 503 until it may be fetched, not 401", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const user = randomUUID();
  const { code } = await invitation(server, { userId: user });
  const body = { activationCode: code, fingerprint: "rotated-1", useInteractiveUser: true };
  const unknownKid = { ...t.context.signer, kid: `unknown-${randomUUID()}` };
  // Refused either way (401 if it made jose fetch the set, 503 if a fetch was held off): the set is now fetched
  // too recently to be fetched again at once.
  const probe = await activateAs(server, await userToken(unknownKid, clock.now(), user), body);
  t.not(probe.status, 200);
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const added = { key: privateKey, alg: "ES256", kid: `added-${randomUUID()}` };
  t.context.published.keys.push({ ...(await exportJWK(publicKey)), kid: added.kid, alg: "ES256", use: "sig" });
  const soon = await activateAs(server, await userToken(added, clock.now(), user), body);
  t.is(soon.status, 503, JSON.stringify(soon.body));
  t.is(problemSlug(soon.body), "user-token-issuer-unavailable");
  t.is(soon.headers.get("retry-after"), "30");
});
