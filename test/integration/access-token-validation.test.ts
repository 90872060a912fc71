import { randomBytes, randomUUID } from "node:crypto";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import {
  decodeJwt,
  decodeProtectedHeader,
  generateKeyPair,
  type JWTHeaderParameters,
  type JWTPayload,
  SignJWT,
} from "jose";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { accessToken } from "../support/auth.js";
import { bearerWithScopes, mintAccessToken, tokenGenerationOf } from "../support/credentials.js";
import { manualClock } from "../support/manual-clock.js";
import { CLIENTS } from "../support/oauth-clients.js";
import { type JsonResponse, PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer; adminGeneration: string }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
  t.context.adminGeneration = await tokenGenerationOf(t.context.server.app, t.context.server.admin.clientId);
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** A header and claims like those the service issues to its bootstrap client (`gen`: its token generation). */
function standardToken(
  { server, adminGeneration }: { server: TestServer; adminGeneration: string },
  now = Math.floor(Date.now() / 1000),
) {
  return {
    header: { alg: "ES256", typ: "at+jwt" } as JWTHeaderParameters,
    payload: {
      iss: decodeJwt(server.adminAuthorization.slice("Bearer ".length)).iss,
      aud: "provision-api",
      sub: server.admin.clientId,
      client_id: server.admin.clientId,
      provider_id: DEFAULT_PROVIDER_ID,
      scope: "*",
      gen: adminGeneration,
      iat: now,
      exp: now + 300,
      jti: randomUUID(),
    } as JWTPayload,
  };
}

/** Signs `payload` with the server's own current signing key and `header` (kid added). */
async function signWithServerKey(server: TestServer, header: JWTHeaderParameters, payload: JWTPayload) {
  const { kid, privateKey } = await server.app.keys.signingKey();
  return new SignJWT(payload).setProtectedHeader({ ...header, alg: "ES256", kid }).sign(privateKey);
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

function listWith(server: TestServer, authorization: string) {
  return rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization });
}

function assertInvalidToken(t: ExecutionContext, response: JsonResponse, what: string) {
  t.is(response.status, 401, `${what}: ${JSON.stringify(response.body)}`);
  t.is(response.headers.get("content-type"), "application/problem+json", what);
  const challenge = response.headers.get("www-authenticate") ?? "";
  t.regex(challenge, /^Bearer realm="provision"/, what);
  t.true(challenge.includes('error="invalid_token"'), `${what}: ${challenge}`);
  t.is(response.body.items, undefined, `${what}: no data`);
}

test("a token made like the service's own, with its key, is accepted (the forgeries below differ in one thing)", async (t) => {
  const { server } = t.context;
  const { header, payload } = standardToken(t.context);
  const token = await signWithServerKey(server, header, payload);
  t.is((await listWith(server, `Bearer ${token}`)).status, 200);
});

test("a missing, empty or non-Bearer Authorization is refused with 401 and a bare Bearer challenge", async (t) => {
  const { server } = t.context;
  const token = server.adminAuthorization.slice("Bearer ".length);
  for (const authorization of ["", "Bearer", "Bearer ", `Basic ${token}`, token, `Bearer ${token} extra`]) {
    const what = JSON.stringify(authorization);
    const response = await listWith(server, authorization);
    t.is(response.status, 401, what);
    t.is(response.headers.get("www-authenticate"), 'Bearer realm="provision"', what);
    t.is(response.body.type, "urn:provision:problem:unauthenticated", what);
  }
});

test("malformed tokens are refused with 401 invalid_token", async (t) => {
  const { server } = t.context;
  const token = server.adminAuthorization.slice("Bearer ".length);
  const [head, body, signature] = token.split(".");
  const flipped = `${signature.slice(0, -2)}${signature.at(-2) === "A" ? "B" : "A"}${signature.at(-1)}`;
  for (const malformed of [
    "not-a-jwt",
    "a.b.c",
    `${head}.${body}`,
    `${head}.${body}.${flipped}`,
    `${head}.${base64url({ ...JSON.parse(Buffer.from(body, "base64url").toString()), provider_id: randomUUID() })}.${signature}`,
  ]) {
    assertInvalidToken(t, await listWith(server, `Bearer ${malformed}`), malformed);
  }
});

test("a token signed by another ES256 key is refused, whatever kid it names", async (t) => {
  const { server } = t.context;
  const { privateKey } = await generateKeyPair("ES256");
  const { kid } = decodeProtectedHeader(server.adminAuthorization.slice("Bearer ".length));
  const { header, payload } = standardToken(t.context);
  for (const named of [kid, "some-other-key"]) {
    const token = await new SignJWT(payload).setProtectedHeader({ ...header, kid: named }).sign(privateKey);
    assertInvalidToken(t, await listWith(server, `Bearer ${token}`), `kid ${named}`);
  }
});

test("an unsigned token (alg none) and an HMAC-signed one are refused", async (t) => {
  const { server } = t.context;
  const { kid } = await server.app.keys.signingKey();
  const { header, payload } = standardToken(t.context);
  const unsigned = `${base64url({ ...header, alg: "none", kid })}.${base64url(payload)}.`;
  assertInvalidToken(t, await listWith(server, `Bearer ${unsigned}`), "alg none");
  const hmac = await new SignJWT(payload)
    .setProtectedHeader({ ...header, alg: "HS256", kid })
    .sign(new TextEncoder().encode("a shared secret nobody should accept here"));
  assertInvalidToken(t, await listWith(server, `Bearer ${hmac}`), "HS256");
});

test("a token with the wrong issuer, audience or type is refused even when signed with the service's key", async (t) => {
  const { server } = t.context;
  const { header, payload } = standardToken(t.context);
  const variants: [string, JWTHeaderParameters, JWTPayload][] = [
    ["issuer", header, { ...payload, iss: "https://evil.example" }],
    ["no issuer", header, { ...payload, iss: undefined }],
    ["audience", header, { ...payload, aud: "another-api" }],
    ["type", { ...header, typ: "JWT" }, payload],
    ["no provider", header, { ...payload, provider_id: undefined }],
    ["no scope", header, { ...payload, scope: undefined }],
    ["no token generation", header, { ...payload, gen: undefined }],
    ["another token generation", header, { ...payload, gen: "an-earlier-generation" }],
    ["no expiry", header, { ...payload, exp: undefined }],
  ];
  for (const [what, variantHeader, variantPayload] of variants) {
    const token = await signWithServerKey(server, variantHeader, variantPayload);
    assertInvalidToken(t, await listWith(server, `Bearer ${token}`), what);
  }
});

test("a token naming a client that does not exist, or another provider than its client's, is refused", async (t) => {
  const { server } = t.context;
  const ghost = await mintAccessToken(server.app, "ghost", ["*"]);
  assertInvalidToken(t, await listWith(server, `Bearer ${ghost}`), "unknown client");
  const elsewhere = await mintAccessToken(server.app, server.admin.clientId, ["*"], randomUUID());
  assertInvalidToken(t, await listWith(server, `Bearer ${elsewhere}`), "another provider");
});

test("a disabled client's unexpired token is refused at once, and stays refused once the client is enabled again", async (t) => {
  const { server } = t.context;
  const created = await rest(server.baseUrl, "POST", CLIENTS, { name: "to disable", scopes: ["catalog:read"] });
  t.is(created.status, 200);
  const { clientId } = created.body.client;
  const authorization = `Bearer ${await accessToken(server.baseUrl, clientId, created.body.clientSecret)}`;
  t.is((await listWith(server, authorization)).status, 200);

  t.is((await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/false`)).status, 200);
  assertInvalidToken(t, await listWith(server, authorization), "disabled");

  t.is((await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/true`)).status, 200);
  assertInvalidToken(t, await listWith(server, authorization), "issued before the client was disabled");
  const fresh = `Bearer ${await accessToken(server.baseUrl, clientId, created.body.clientSecret)}`;
  t.is((await listWith(server, fresh)).status, 200, "a token issued after enabling works");
});

test("rotating a client's secret revokes the tokens it already holds", async (t) => {
  const { server } = t.context;
  const created = await rest(server.baseUrl, "POST", CLIENTS, { name: "to rotate", scopes: ["catalog:read"] });
  const { clientId } = created.body.client;
  const authorization = `Bearer ${await accessToken(server.baseUrl, clientId, created.body.clientSecret)}`;
  t.is((await listWith(server, authorization)).status, 200);

  const rotated = await rest(server.baseUrl, "POST", `${CLIENTS}/${clientId}/secret`, {});
  t.is(rotated.status, 200);
  assertInvalidToken(t, await listWith(server, authorization), "issued before the rotation");
  const fresh = `Bearer ${await accessToken(server.baseUrl, clientId, rotated.body.clientSecret)}`;
  t.is((await listWith(server, fresh)).status, 200);
});

test("a deleted client's unexpired token is refused at once", async (t) => {
  const { server } = t.context;
  const created = await rest(server.baseUrl, "POST", CLIENTS, { name: "to delete", scopes: ["catalog:read"] });
  const { clientId } = created.body.client;
  const authorization = `Bearer ${await accessToken(server.baseUrl, clientId, created.body.clientSecret)}`;
  t.is((await listWith(server, authorization)).status, 200);

  t.is((await rest(server.baseUrl, "DELETE", `${CLIENTS}/${clientId}`)).status, 200);
  assertInvalidToken(t, await listWith(server, authorization), "deleted");
});

test("a client deleted and made again with its id (bootstrap) does not revive the tokens issued before", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const clientId = `boot-${randomBytes(4).toString("hex")}`;
  const clientSecret = randomBytes(32).toString("base64url");
  const env = { PROVISION_BOOTSTRAP_CLIENT_ID: clientId, PROVISION_BOOTSTRAP_CLIENT_SECRET: clientSecret };
  const first = await startTestServer({ databaseUrl: database.url, env });
  t.teardown(() => first.close());
  const authorization = `Bearer ${await accessToken(first.baseUrl, clientId, clientSecret)}`;
  t.is((await listWith(first, authorization)).status, 200);
  t.is((await rest(first.baseUrl, "DELETE", `${CLIENTS}/${clientId}`, undefined, { authorization })).status, 200);
  assertInvalidToken(t, await listWith(first, authorization), "deleted");

  // The next start makes the configured client again, with the same id, provider, scopes and secret.
  const second = await startTestServer({ databaseUrl: database.url, env });
  t.teardown(() => second.close());
  const fresh = `Bearer ${await accessToken(second.baseUrl, clientId, clientSecret)}`;
  t.is((await listWith(second, fresh)).status, 200, "the client is back");
  assertInvalidToken(t, await listWith(second, authorization), "issued before the delete, on the new instance");
  assertInvalidToken(t, await listWith(first, authorization), "issued before the delete, on the old instance");
});

test("a token carries only the scopes it was issued with, not every scope of its client", async (t) => {
  const { server } = t.context;
  const narrow = await bearerWithScopes(server, ["catalog:read"]);
  t.is((await listWith(server, narrow)).status, 200);
  const create = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "NARROW" }, { authorization: narrow });
  t.is(create.status, 403);
});

test("an expired token is refused with 401 after the 30 s of tolerated skew, not before", async (t) => {
  const clock = manualClock();
  const server = await startTestServer({ clock });
  t.teardown(() => server.close());
  const token = await mintAccessToken(server.app, server.admin.clientId, ["catalog:read"]);
  const authorization = `Bearer ${token}`;
  t.is((await listWith(server, authorization)).status, 200);

  clock.advance((600 + 25) * 1000);
  t.is((await listWith(server, authorization)).status, 200, "within the skew tolerance");

  clock.advance(10 * 1000);
  const expired = await listWith(server, authorization);
  assertInvalidToken(t, expired, "expired");
  t.regex(expired.body.detail, /expired/);
  t.regex(expired.headers.get("www-authenticate") ?? "", /error_description="expired"/);
});
