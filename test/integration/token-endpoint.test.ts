import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { hashSecret, newTokenGeneration } from "../../src/auth/secrets.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { requestToken } from "../support/auth.js";
import { manualClock } from "../support/manual-clock.js";
import { basicCredentials, CLIENTS, createClient, postToken } from "../support/oauth-clients.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

const ISSUER = "https://provision.example.test";
const TOKEN_ENDPOINT = "/auth/connect/token";

test.before(async (t) => {
  t.context.server = await startTestServer({ env: { PUBLIC_BASE_URL: ISSUER } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

function credentials(client: { clientId: string; clientSecret: string }) {
  return { client_id: client.clientId, client_secret: client.clientSecret };
}

async function jwks(baseUrl: string): Promise<JSONWebKeySet> {
  const response = await fetch(`${baseUrl}/.well-known/jwks.json`);
  return (await response.json()) as JSONWebKeySet;
}

function assertOAuthError(
  t: import("ava").ExecutionContext,
  response: { status: number; headers: Headers; body: any },
  status: number,
  error: string,
) {
  t.is(response.status, status, JSON.stringify(response.body));
  t.is(response.body.error, error);
  t.is(typeof response.body.error_description, "string");
  t.regex(response.headers.get("content-type") ?? "", /^application\/json/);
  t.is(response.headers.get("cache-control"), "no-store");
  if (status === 401) t.regex(response.headers.get("www-authenticate") ?? "", /^Basic /);
}

test("client_secret_post gets a token of exactly the RFC 6749 shape, never cached", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read", "entitlements:read"]);
  const response = await postToken(server.baseUrl, { grant_type: "client_credentials", ...credentials(client) });
  t.is(response.status, 200, JSON.stringify(response.body));
  t.deepEqual(Object.keys(response.body).sort(), ["access_token", "expires_in", "scope", "token_type"]);
  t.like(response.body, { token_type: "Bearer", expires_in: 600, scope: "catalog:read entitlements:read" });
  t.is(typeof response.body.access_token, "string");
  t.is(response.headers.get("cache-control"), "no-store");
  t.regex(response.headers.get("content-type") ?? "", /^application\/json/);
});

test("HTTP Basic gets a token with id and secret form-urlencoded before base64", async (t) => {
  const { server } = t.context;
  const clientId = `basic:id ${randomBytes(4).toString("hex")}+~%/`;
  const clientSecret = `s3cret:with+plus %percent/slash=equals&amp ü ${randomBytes(8).toString("hex")}`;
  await new IdentityRepository(server.app.dataSource).insertClient({
    clientId,
    providerId: DEFAULT_PROVIDER_ID,
    name: "basic client",
    scopes: "catalog:read",
    secretHash: await hashSecret(clientSecret),
    disabled: false,
    tokenGeneration: newTokenGeneration(),
    createdAt: new Date(),
    lastUsedAt: null,
  });
  const authorization = basicCredentials(clientId, clientSecret);
  t.notRegex(Buffer.from(authorization.slice(6), "base64").toString(), /[ ü]/, "the credentials are encoded");
  const response = await postToken(server.baseUrl, { grant_type: "client_credentials" }, { authorization });
  t.is(response.status, 200, JSON.stringify(response.body));
  t.is(decodeJwt(response.body.access_token).sub, clientId);
});

test("HTTP Basic works for a client made through the admin API", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  const response = await postToken(
    server.baseUrl,
    { grant_type: "client_credentials" },
    { authorization: basicCredentials(client.clientId, client.clientSecret) },
  );
  t.is(response.status, 200, JSON.stringify(response.body));
  t.is(response.body.scope, "catalog:read");
});

test("the access token is an ES256 at+jwt signed by a key of the JWKS, for the client and the API", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*", "reporting:read"]);
  const { body } = await requestToken(server.baseUrl, client.clientId, client.clientSecret);
  const header = decodeProtectedHeader(body.access_token);
  t.is(header.alg, "ES256");
  t.is(header.typ, "at+jwt");
  const keySet = await jwks(server.baseUrl);
  t.true(
    keySet.keys.some((key) => key.kid === header.kid),
    `kid ${header.kid} is in the JWKS`,
  );
  const claims = decodeJwt(body.access_token);
  t.like(claims, { iss: ISSUER, sub: client.clientId, aud: "provision-api", scope: "catalog:* reporting:read" });
  t.is((claims.exp ?? 0) - (claims.iat ?? 0), 600);
  const { payload } = await jwtVerify(body.access_token, createLocalJWKSet(keySet), {
    issuer: ISSUER,
    audience: "provision-api",
    typ: "at+jwt",
  });
  t.is(payload.sub, client.clientId);
});

test("the JWKS holds public keys only", async (t) => {
  const keySet = await jwks(t.context.server.baseUrl);
  t.true(keySet.keys.length > 0);
  for (const key of keySet.keys) {
    t.like(key, { kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
    t.false("d" in key);
  }
});

test("a wrong secret is invalid_client with 401 and a Basic challenge", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  const response = await postToken(server.baseUrl, {
    grant_type: "client_credentials",
    client_id: client.clientId,
    client_secret: `${client.clientSecret}x`,
  });
  assertOAuthError(t, response, 401, "invalid_client");
});

test("an unknown client is invalid_client with 401", async (t) => {
  const response = await postToken(t.context.server.baseUrl, {
    grant_type: "client_credentials",
    client_id: `unknown-${randomBytes(6).toString("hex")}`,
    client_secret: "whatever-secret",
  });
  assertOAuthError(t, response, 401, "invalid_client");
});

test("a disabled client is invalid_client with 401, even with the right secret", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  t.is((await postToken(server.baseUrl, { grant_type: "client_credentials", ...credentials(client) })).status, 200);
  const disabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${client.clientId}/enabled/false`);
  t.is(disabled.status, 200, JSON.stringify(disabled.body));
  const response = await postToken(server.baseUrl, { grant_type: "client_credentials", ...credentials(client) });
  assertOAuthError(t, response, 401, "invalid_client");
});

test("a request without client credentials is invalid_client with 401", async (t) => {
  const response = await postToken(t.context.server.baseUrl, { grant_type: "client_credentials" });
  assertOAuthError(t, response, 401, "invalid_client");
});

test("an Authorization header of another scheme than Basic is invalid_client with 401", async (t) => {
  const { server } = t.context;
  const response = await postToken(
    server.baseUrl,
    { grant_type: "client_credentials", ...credentials(server.admin) },
    { authorization: server.adminAuthorization },
  );
  assertOAuthError(t, response, 401, "invalid_client");
  t.regex(response.body.error_description, /must use the Basic scheme/);
});

test("Basic credentials that are not base64 are invalid_client, said to be malformed", async (t) => {
  const { server } = t.context;
  const response = await postToken(
    server.baseUrl,
    { grant_type: "client_credentials" },
    { authorization: "Basic !!!!" },
  );
  assertOAuthError(t, response, 401, "invalid_client");
  t.regex(response.body.error_description, /malformed Basic credentials/);
});

test("a request without grant_type is invalid_request with 400", async (t) => {
  const response = await postToken(t.context.server.baseUrl, credentials(t.context.server.admin));
  assertOAuthError(t, response, 400, "invalid_request");
});

test("a repeated parameter is invalid_request with 400", async (t) => {
  const { admin, baseUrl } = t.context.server;
  const form = new URLSearchParams({ grant_type: "client_credentials", ...credentials(admin), scope: "catalog:read" });
  form.append("scope", "entitlements:read");
  assertOAuthError(t, await postToken(baseUrl, form), 400, "invalid_request");
  const twiceGrant = new URLSearchParams({ grant_type: "client_credentials", ...credentials(admin) });
  twiceGrant.append("grant_type", "client_credentials");
  assertOAuthError(t, await postToken(baseUrl, twiceGrant), 400, "invalid_request");
});

test("HTTP Basic and client_secret together are invalid_request with 400", async (t) => {
  const { admin, baseUrl } = t.context.server;
  const response = await postToken(
    baseUrl,
    { grant_type: "client_credentials", client_secret: admin.clientSecret },
    { authorization: basicCredentials(admin.clientId, admin.clientSecret) },
  );
  assertOAuthError(t, response, 400, "invalid_request");
});

test("a body that is not form-urlencoded is invalid_request with 400", async (t) => {
  const { admin, baseUrl } = t.context.server;
  const response = await fetch(baseUrl + TOKEN_ENDPOINT, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ grant_type: "client_credentials", ...credentials(admin) }),
  });
  assertOAuthError(
    t,
    { status: response.status, headers: response.headers, body: await response.json() },
    400,
    "invalid_request",
  );
});

test("a body declared compressed is invalid_request with 400, not read as it stands", async (t) => {
  const { admin, baseUrl } = t.context.server;
  const response = await fetch(baseUrl + TOKEN_ENDPOINT, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", "content-encoding": "gzip" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...credentials(admin) }).toString(),
  });
  const body = (await response.json()) as { error_description: string };
  assertOAuthError(t, { status: response.status, headers: response.headers, body }, 400, "invalid_request");
  t.regex(body.error_description, /uncompressed/);
});

test("the password and authorization_code grants are unsupported_grant_type with 400", async (t) => {
  const { admin, baseUrl } = t.context.server;
  for (const grant_type of ["password", "authorization_code"]) {
    const response = await postToken(baseUrl, {
      grant_type,
      ...credentials(admin),
      username: "u",
      password: "p",
      code: "c",
    });
    assertOAuthError(t, response, 400, "unsupported_grant_type");
  }
});

test("a scope the client was not granted is invalid_scope with 400", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*"]);
  for (const scope of ["entitlements:read", "catalog:read entitlements:read", "*:read", "*"]) {
    const response = await requestToken(server.baseUrl, client.clientId, client.clientSecret, scope);
    assertOAuthError(t, response, 400, "invalid_scope");
  }
});

test("a scope outside the scope catalog is invalid_scope with 400, even for an all-scopes client", async (t) => {
  const { admin, baseUrl } = t.context.server;
  for (const scope of ["foo:read", "catalog", "catalog:read:x"]) {
    const response = await requestToken(baseUrl, admin.clientId, admin.clientSecret, scope);
    assertOAuthError(t, response, 400, "invalid_scope");
  }
});

test("a client may narrow its token to some of its scopes, and gets exactly those", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*"]);
  const { status, body } = await requestToken(server.baseUrl, client.clientId, client.clientSecret, "catalog:read");
  t.is(status, 200, JSON.stringify(body));
  t.is(body.scope, "catalog:read");
  t.is(decodeJwt(body.access_token).scope, "catalog:read");
});

test("without a scope parameter the token carries every granted scope", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*", "entitlements:read"]);
  const { status, body } = await requestToken(server.baseUrl, client.clientId, client.clientSecret);
  t.is(status, 200, JSON.stringify(body));
  t.is(body.scope, "catalog:* entitlements:read");
  t.is(decodeJwt(body.access_token).scope, "catalog:* entitlements:read");
});

test("parameters sent without a value count as omitted (RFC 6749 §3.1): an empty scope gets every granted scope", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*", "entitlements:read"]);
  for (const body of [
    `grant_type=client_credentials&client_id=${client.clientId}&client_secret=${client.clientSecret}&scope=`,
    `grant_type=client_credentials&client_id=${client.clientId}&client_secret=${client.clientSecret}&scope`,
  ]) {
    const response = await postToken(server.baseUrl, new URLSearchParams(body));
    t.is(response.status, 200, `${body.replace(client.clientSecret, "…")}: ${JSON.stringify(response.body)}`);
    t.is(response.body.scope, "catalog:* entitlements:read");
    t.is(decodeJwt(response.body.access_token).scope, "catalog:* entitlements:read");
  }
  const noGrant = await postToken(server.baseUrl, { grant_type: "", ...credentials(client) });
  assertOAuthError(t, noGrant, 400, "invalid_request");
});

test("HTTP Basic with an empty client_id or client_secret in the form is no second authentication", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  const authorization = basicCredentials(client.clientId, client.clientSecret);
  const extras: Record<string, string>[] = [
    { client_id: "" },
    { client_secret: "" },
    { client_id: "", client_secret: "" },
  ];
  for (const extra of extras) {
    const response = await postToken(server.baseUrl, { grant_type: "client_credentials", ...extra }, { authorization });
    t.is(response.status, 200, `${JSON.stringify(extra)}: ${JSON.stringify(response.body)}`);
    t.is(decodeJwt(response.body.access_token).sub, client.clientId);
  }
  const conflicting = await postToken(
    server.baseUrl,
    { grant_type: "client_credentials", client_secret: client.clientSecret },
    { authorization },
  );
  assertOAuthError(t, conflicting, 400, "invalid_request");
});

test("a token narrowed to catalog:read reads products but may not create one", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:*"]);
  const { body } = await requestToken(server.baseUrl, client.clientId, client.clientSecret, "catalog:read");
  const authorization = `Bearer ${body.access_token}`;
  const read = await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization });
  t.is(read.status, 200, JSON.stringify(read.body));
  const created = await rest(
    server.baseUrl,
    "POST",
    PRODUCTS,
    { productCode: `NARROW-${randomBytes(4).toString("hex")}`, productVersion: "1", name: "Narrow" },
    { authorization },
  );
  t.is(created.status, 403, JSON.stringify(created.body));
  t.regex(created.headers.get("www-authenticate") ?? "", /error="insufficient_scope"/);
});

test("the discovery document names the issuer, the endpoints, the grant and the scopes", async (t) => {
  const response = await fetch(`${t.context.server.baseUrl}/.well-known/openid-configuration`);
  t.is(response.status, 200);
  const document = (await response.json()) as Record<string, unknown>;
  t.like(document, {
    issuer: ISSUER,
    token_endpoint: `${ISSUER}/auth/connect/token`,
    jwks_uri: `${ISSUER}/.well-known/jwks.json`,
  });
  t.deepEqual(document.grant_types_supported, ["client_credentials"]);
  const scopes = document.scopes_supported as string[];
  t.true(Array.isArray(scopes));
  for (const scope of ["catalog:read", "catalog:create", "entitlements:write", "clients:delete", "reporting:read"]) {
    t.true(scopes.includes(scope), scope);
  }
  const oauth = await fetch(`${t.context.server.baseUrl}/.well-known/oauth-authorization-server`);
  t.is(oauth.status, 200, "RFC 8414's path serves the same metadata");
  t.deepEqual(await oauth.json(), document);
});

test("a token is accepted until it expires, within the 30 s clock skew, and refused after", async (t) => {
  const clock = manualClock();
  const server = await startTestServer({ clock });
  t.teardown(() => server.close());
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  const { body } = await requestToken(server.baseUrl, client.clientId, client.clientSecret);
  const authorization = `Bearer ${body.access_token}`;
  t.is(decodeJwt(body.access_token).exp, clock.now().getTime() / 1000 + 600);

  clock.advance(590_000);
  t.is((await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization })).status, 200);
  clock.advance(39_000); // T + 629 s: past exp, within the skew
  t.is((await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization })).status, 200);
  clock.advance(2_000); // T + 631 s
  const expired = await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization });
  t.is(expired.status, 401, JSON.stringify(expired.body));
  t.regex(expired.headers.get("www-authenticate") ?? "", /^Bearer .*error="invalid_token"/);
});

test("a client's last_used_at moves each time it gets a token", async (t) => {
  const clock = manualClock();
  const server = await startTestServer({ clock });
  t.teardown(() => server.close());
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  const lastUsedAt = async () => {
    const { status, body } = await rest(server.baseUrl, "GET", `${CLIENTS}/${client.clientId}`);
    t.is(status, 200, JSON.stringify(body));
    t.is(body.clientId, client.clientId);
    return body.lastUsedAt ?? null;
  };
  t.is(await lastUsedAt(), null);

  clock.advance(10_000);
  await requestToken(server.baseUrl, client.clientId, client.clientSecret);
  t.is(new Date(await lastUsedAt()).getTime(), clock.now().getTime());

  clock.advance(60_000);
  await requestToken(server.baseUrl, client.clientId, client.clientSecret);
  t.is(new Date(await lastUsedAt()).getTime(), clock.now().getTime());
});

test("a refused token request leaves last_used_at alone", async (t) => {
  const { server } = t.context;
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  await requestToken(server.baseUrl, client.clientId, `${client.clientSecret}x`);
  await requestToken(server.baseUrl, client.clientId, client.clientSecret, "entitlements:read");
  const { body } = await rest(server.baseUrl, "GET", `${CLIENTS}/${client.clientId}`);
  t.is(body.lastUsedAt ?? null, null);
});
