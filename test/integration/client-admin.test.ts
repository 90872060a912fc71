import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import { ClientAdminService, SetClientEnabledRequestSchema } from "../../gen/provision/v1/client_admin_pb.js";
import { IdentityRepository } from "../../src/auth/identity-repository.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { accessToken, requestToken } from "../support/auth.js";
import { cli } from "../support/cli.js";
import { authorizationMetadata, bearerWithScopes } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { CLIENTS } from "../support/oauth-clients.js";
import { createProviderWithClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

async function createClient(server: TestServer, name: string, scopes: string[], authorization?: string) {
  return rest(server.baseUrl, "POST", CLIENTS, { name, scopes }, authorization ? { authorization } : {});
}

test("creating a client answers its secret once; reading and listing never show it", async (t) => {
  const { server } = t.context;
  const created = await createClient(server, "  Billing back-end  ", ["catalog:read", "entitlements:*"]);
  t.is(created.status, 200, JSON.stringify(created.body));
  const { client, clientSecret } = created.body;
  t.regex(clientSecret, /^\S{32,}$/);
  t.like(client, {
    providerId: DEFAULT_PROVIDER_ID,
    name: "Billing back-end",
    scopes: ["catalog:read", "entitlements:*"],
    disabled: false,
    lastUsedAt: null,
  });
  t.regex(client.clientId, /^\S+$/);
  t.truthy(Date.parse(client.createdAt));

  const read = await rest(server.baseUrl, "GET", `${CLIENTS}/${client.clientId}`);
  t.is(read.status, 200);
  t.deepEqual(read.body, client);
  const listed = await rest(server.baseUrl, "GET", `${CLIENTS}?pageSize=100`);
  t.deepEqual(
    listed.body.items.find((item: { clientId: string }) => item.clientId === client.clientId),
    client,
  );
  for (const body of [read.body, listed.body]) {
    t.false(JSON.stringify(body).includes(clientSecret));
    t.false(JSON.stringify(body).toLowerCase().includes("secret"), JSON.stringify(body));
  }

  const token = await requestToken(server.baseUrl, client.clientId, clientSecret);
  t.is(token.status, 200);
  t.is(token.body.scope, "catalog:read entitlements:*");
  const used = await rest(server.baseUrl, "GET", `${CLIENTS}/${client.clientId}`);
  t.truthy(Date.parse(used.body.lastUsedAt), "lastUsedAt is set once the client got a token");
});

test("a client cannot grant scopes it does not hold: 403", async (t) => {
  const { server } = t.context;
  const caller = await bearerWithScopes(server, ["clients:create", "catalog:read", "catalog:write"]);
  for (const scopes of [["catalog:delete"], ["catalog:*"], ["*:read"], ["*"], ["catalog:read", "clients:read"]]) {
    const refused = await createClient(server, "too much", scopes, caller);
    t.is(refused.status, 403, `${scopes.join(" ")}: ${JSON.stringify(refused.body)}`);
    t.is(refused.body.type, "urn:provision:problem:insufficient-scope");
  }
  for (const scopes of [["catalog:read"], ["catalog:create", "catalog:update"], ["catalog:write"]]) {
    const granted = await createClient(server, "covered", scopes, caller);
    t.is(granted.status, 200, `${scopes.join(" ")}: ${JSON.stringify(granted.body)}`);
  }
});

test("unknown scope names, no scopes and a missing or overlong name answer 400 naming the field", async (t) => {
  const { server } = t.context;
  const cases: [name: string, scopes: string[], field: string][] = [
    ["bad scope", ["catalog:fly"], "scopes"],
    ["bad area", ["billing:read"], "scopes"],
    ["no verb", ["catalog"], "scopes"],
    ["three parts", ["catalog:read:all"], "scopes"],
    ["no scopes", [], "scopes"],
    ["", ["catalog:read"], "name"],
    ["x".repeat(256), ["catalog:read"], "name"],
  ];
  for (const [name, scopes, field] of cases) {
    const response = await createClient(server, name, scopes);
    t.is(response.status, 400, `${name.slice(0, 20)} ${scopes.join(" ")}`);
    t.true(
      response.body.errors.some((error: { field: string }) => error.field === field),
      JSON.stringify(response.body),
    );
  }
});

test("rotating the secret stops the old one and the tokens issued with it at once, and answers a new one that works", async (t) => {
  const { server } = t.context;
  const created = await createClient(server, "to rotate", ["catalog:read"]);
  const { clientId } = created.body.client;
  const oldSecret = created.body.clientSecret;
  const before = await accessToken(server.baseUrl, clientId, oldSecret);

  const rotated = await rest(server.baseUrl, "POST", `${CLIENTS}/${clientId}/secret`, {});
  t.is(rotated.status, 200);
  t.is(rotated.body.client.clientId, clientId);
  const newSecret = rotated.body.clientSecret;
  t.not(newSecret, oldSecret);

  const refused = await requestToken(server.baseUrl, clientId, oldSecret);
  t.is(refused.status, 401);
  t.is(refused.body.error, "invalid_client");
  t.is((await requestToken(server.baseUrl, clientId, newSecret)).status, 200);
  const issuedBefore = await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${before}` });
  t.is(issuedBefore.status, 401, "tokens issued before the rotation are revoked with the old secret");
  t.regex(issuedBefore.headers.get("www-authenticate") ?? "", /error="invalid_token"/);
  t.false(JSON.stringify((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).body).includes(newSecret));
});

test("a disabled client gets no token; enabled again, it does", async (t) => {
  const { server } = t.context;
  const created = await createClient(server, "to disable", ["catalog:read"]);
  const { clientId } = created.body.client;
  const { clientSecret } = created.body;

  const disabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/false`);
  t.is(disabled.status, 200);
  t.like(disabled.body, { clientId, disabled: true });
  t.true((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).body.disabled);
  const refused = await requestToken(server.baseUrl, clientId, clientSecret);
  t.is(refused.status, 401);
  t.is(refused.body.error, "invalid_client");

  const enabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/true`);
  t.like(enabled.body, { clientId, disabled: false });
  t.is((await requestToken(server.baseUrl, clientId, clientSecret)).status, 200);
});

test("a deleted client is gone: 404 on read and on a second delete, and no token", async (t) => {
  const { server } = t.context;
  const created = await createClient(server, "to delete", ["catalog:read"]);
  const { clientId } = created.body.client;
  const deleted = await rest(server.baseUrl, "DELETE", `${CLIENTS}/${clientId}`);
  t.is(deleted.status, 200);
  t.deepEqual(deleted.body, {});
  t.is((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).status, 404);
  t.is((await rest(server.baseUrl, "DELETE", `${CLIENTS}/${clientId}`)).status, 404);
  const listed = await rest(server.baseUrl, "GET", `${CLIENTS}?pageSize=100`);
  t.false(listed.body.items.some((item: { clientId: string }) => item.clientId === clientId));
  t.is((await requestToken(server.baseUrl, clientId, created.body.clientSecret)).status, 401);
});

test("the client list is paged, newest first", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.close());
  const names = ["first", "second", "third"];
  for (const name of names) t.is((await createClient(server, name, ["catalog:read"])).status, 200);
  const page1 = await rest(server.baseUrl, "GET", `${CLIENTS}?pageSize=2`);
  t.like(page1.body, { currentPage: 1, pageSize: 2, totalCount: 4, totalPages: 2, from: 1, to: 2, hasNextPage: true });
  const page2 = await rest(server.baseUrl, "GET", `${CLIENTS}?pageSize=2&pageNumber=2`);
  t.like(page2.body, { currentPage: 2, from: 3, to: 4, hasPreviousPage: true, hasNextPage: false });
  const order = [...page1.body.items, ...page2.body.items].map((item: { name: string }) => item.name);
  t.deepEqual(order, ["third", "second", "first", "bootstrap"]);
  t.is((await rest(server.baseUrl, "GET", `${CLIENTS}?pageSize=101`)).status, 400);
});

// Rotating, disabling or deleting a client needs every scope that client holds: otherwise a client allowed
// only clients:update could read a new secret of an all-scopes client from the answer.
test("a client cannot take over a client with scopes it does not hold by rotating its secret", async (t) => {
  const { server } = t.context;
  const limited = await createClient(server, "limited", ["clients:update"]);
  const token = await accessToken(server.baseUrl, limited.body.client.clientId, limited.body.clientSecret);
  const powerful = await createClient(server, "powerful", ["*"]);
  const { clientId } = powerful.body.client;
  const rotated = await rest(
    server.baseUrl,
    "POST",
    `${CLIENTS}/${clientId}/secret`,
    {},
    {
      authorization: `Bearer ${token}`,
    },
  );
  t.is(rotated.status, 403, `answered ${rotated.status} with the secret of a client holding *`);
  t.is(rotated.body.clientSecret, undefined);
  t.is((await requestToken(server.baseUrl, clientId, powerful.body.clientSecret)).status, 200);
});

test("a client cannot delete or disable a client with scopes it does not hold", async (t) => {
  const { server } = t.context;
  const limited = await createClient(server, "limited-deleter", ["clients:delete", "clients:update"]);
  const authorization = `Bearer ${await accessToken(server.baseUrl, limited.body.client.clientId, limited.body.clientSecret)}`;
  const powerful = await createClient(server, "powerful-target", ["catalog:*"]);
  const { clientId } = powerful.body.client;
  const disabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/false`, undefined, {
    authorization,
  });
  t.is(disabled.status, 403);
  const deleted = await rest(server.baseUrl, "DELETE", `${CLIENTS}/${clientId}`, undefined, { authorization });
  t.is(deleted.status, 403);
  t.is((await requestToken(server.baseUrl, clientId, powerful.body.clientSecret)).status, 200);
});

test("SetClientEnabled without `enabled` (Connect, gRPC) is refused naming the field and changes nothing", async (t) => {
  const { server } = t.context;
  const created = await createClient(server, "explicit switch", ["catalog:read"]);
  const { clientId } = created.body.client;
  const connect = (body: unknown) =>
    fetch(`${server.baseUrl}/provision.v1.ClientAdminService/SetClientEnabled`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: server.adminAuthorization },
      body: JSON.stringify(body),
    });

  const refused = await connect({ clientId });
  const error = (await refused.json()) as { code: string; message: string };
  t.is(refused.status, 400, JSON.stringify(error));
  t.is(error.code, "invalid_argument");
  t.regex(error.message, /\benabled\b/);

  const grpcCall = grpcClient(ClientAdminService, `127.0.0.1:${server.port}`);
  t.teardown(() => grpcCall.close());
  const grpcError = await grpcCall
    .call(
      "setClientEnabled",
      create(SetClientEnabledRequestSchema, { clientId }),
      authorizationMetadata(server.adminAuthorization),
    )
    .then(
      () => undefined,
      (failure: grpc.ServiceError) => failure,
    );
  t.is(grpcError?.code, grpc.status.INVALID_ARGUMENT, grpcError?.details);
  t.regex(grpcError?.details ?? "", /\benabled\b/);

  t.false((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).body.disabled, "still enabled");
  t.is((await requestToken(server.baseUrl, clientId, created.body.clientSecret)).status, 200);

  const disabled = await connect({ clientId, enabled: false });
  t.is(disabled.status, 200);
  t.true(((await disabled.json()) as { client: { disabled: boolean } }).client.disabled, "an explicit false disables");
});

test("listing clients without a provider id fails instead of listing every provider's", async (t) => {
  const { server } = t.context;
  const identity = new IdentityRepository(server.app.dataSource);
  const other = await createProviderWithClient(server);
  for (const providerId of ["", undefined, null]) {
    await t.throwsAsync(() => identity.listClients(providerId as unknown as string, 0, 100), {
      message: /provider id/,
    });
  }
  const own = await identity.listClients(DEFAULT_PROVIDER_ID, 0, 100);
  t.true(own.rows.length > 0);
  t.true(own.rows.every((row) => row.providerId === DEFAULT_PROVIDER_ID));
  const all = await identity.listAllClients(0, 1000);
  t.true(all.rows.some((row) => row.clientId === other.clientId));
  t.true(all.rows.some((row) => row.providerId === DEFAULT_PROVIDER_ID));
});

test("the CLI lists every provider's clients without --provider, and one provider's with it", async (t) => {
  const { server } = t.context;
  const other = await createProviderWithClient(server);
  const databaseUrl = String((server.app.dataSource.options as { url?: string }).url);
  t.regex(databaseUrl, /^mysql:/);
  const ids = (entries: Array<{ clientId: string }>) => entries.map((entry) => entry.clientId);
  const all = ids(await cli(databaseUrl, "clients", "list"));
  t.true(all.includes(other.clientId));
  t.true(all.includes(server.admin.clientId));
  t.deepEqual(ids(await cli(databaseUrl, "clients", "list", "--provider", other.providerId)), [other.clientId]);
});
