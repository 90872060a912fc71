import { getOption } from "@bufbuild/protobuf";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { AuthMode, auth } from "../../gen/provision/v1/auth_pb.js";
import { isValidScope } from "../../src/auth/scopes.js";
import { ALL_SERVICES } from "../../src/services.js";
import { clientRoutes, IMPLEMENTED_SERVICES, nearMissScopes } from "../support/contract.js";
import { bearerWithScopes } from "../support/credentials.js";
import { type JsonResponse, PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

const ROUTES = clientRoutes();

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

function assertProblem(t: ExecutionContext, response: JsonResponse, status: number, what: string) {
  t.is(response.status, status, `${what}: ${JSON.stringify(response.body)}`);
  t.is(response.headers.get("content-type"), "application/problem+json", what);
  t.is(response.body?.status, status, what);
}

test("every RPC of the contract declares a credential, and every client RPC a scope of the catalog", (t) => {
  for (const rpc of ALL_SERVICES.flatMap((service) => service.methods)) {
    const requirement = getOption(rpc, auth);
    t.not(requirement.mode, AuthMode.UNSPECIFIED, `${rpc.parent.name}.${rpc.name} declares no auth mode`);
    if (requirement.mode === AuthMode.CLIENT) {
      t.true(isValidScope(requirement.scope), `${rpc.name}: ${requirement.scope}`);
      t.false(requirement.scope.includes("*"), `${rpc.name} needs a concrete scope`);
    }
  }
});

test("the client routes cover the admin, operational, webhook-admin and client-admin APIs", (t) => {
  const prefixes = [
    "/api/v1/provision/admin/assets/",
    "/api/v1/provision/admin/entitlements",
    "/api/v1/provision/operational/",
    "/api/v1/webhooks/admin/",
    "/api/v1/provision/admin/clients",
  ];
  for (const prefix of prefixes) {
    t.true(
      ROUTES.some((route) => route.path.startsWith(prefix)),
      prefix,
    );
  }
  t.true(ROUTES.length >= 30, `${ROUTES.length} routes`);
  t.false(
    ROUTES.some((route) => route.path.startsWith("/api/v1/activations/") || route.path === "/api/v1/webhooks/schemas"),
    "activation and the public schemas are anonymous",
  );
});

/**
 * What each implemented route answers a caller holding exactly its scope, for the request `clientRoutes()` makes:
 * random ids in the path (nothing to find) and an empty body. Past authorization, each fails or succeeds on its
 * own terms: lists and an empty import succeed, reads and changes of what does not exist are 404, and a create
 * (or a monitored resource, validated before its product is looked up) without its required fields is 400.
 */
const ALLOWED_OUTCOMES: Record<string, { status: number; problem?: string }> = {
  ListProducts: { status: 200 },
  GetProduct: { status: 404, problem: "not-found" },
  CreateProduct: { status: 400, problem: "validation" },
  UpdateProduct: { status: 404, problem: "not-found" },
  ImportProducts: { status: 200 },
  AddFeature: { status: 404, problem: "not-found" },
  UpdateFeature: { status: 404, problem: "not-found" },
  AddMonitoredResource: { status: 400, problem: "validation" },
  UpdateMonitoredResource: { status: 400, problem: "validation" },
  CreateClient: { status: 400, problem: "validation" },
  ListClients: { status: 200 },
  GetClient: { status: 404, problem: "not-found" },
  RotateClientSecret: { status: 404, problem: "not-found" },
  SetClientEnabled: { status: 404, problem: "not-found" },
  DeleteClient: { status: 404, problem: "not-found" },
  CreateEntitlement: { status: 200 },
  GetEntitlement: { status: 404, problem: "not-found" },
  ListEntitlements: { status: 200 },
  UpdateEntitlement: { status: 404, problem: "not-found" },
  ConvertToTemplate: { status: 400, problem: "validation" },
  CreateFromTemplate: { status: 400, problem: "validation" },
  CreateActivationCode: { status: 404, problem: "not-found" },
  SetActivationEnabled: { status: 404, problem: "not-found" },
  SetClaimBasedSeats: { status: 400, problem: "validation" },
  SetSubscriptionActive: { status: 400, problem: "validation" },
  ListActivationCodes: { status: 404, problem: "not-found" },
  DeleteActivationCode: { status: 404, problem: "not-found" },
  ListSessions: { status: 404, problem: "not-found" },
  EndSession: { status: 404, problem: "not-found" },
  CreateSubscription: { status: 400, problem: "validation" },
  ListSubscriptions: { status: 200 },
  GetSubscription: { status: 404, problem: "not-found" },
  UpdateSubscription: { status: 404, problem: "not-found" },
  DeleteSubscription: { status: 404, problem: "not-found" },
  TestFireSubscription: { status: 400, problem: "validation" },
  RotateSubscriptionSecret: { status: 404, problem: "not-found" },
  VerifySubscription: { status: 404, problem: "not-found" },
  ListDeliveries: { status: 404, problem: "not-found" },
  GetDelivery: { status: 404, problem: "not-found" },
  RequeueDelivery: { status: 404, problem: "not-found" },
  RequeueFailedDeliveries: { status: 404, problem: "not-found" },
  GetEntitlementUsage: { status: 404, problem: "not-found" },
  ListUsageTransactions: { status: 404, problem: "not-found" },
  AddCredits: { status: 404, problem: "not-found" },
  ListSessionLogs: { status: 404, problem: "not-found" },
  ListSessionMetrics: { status: 404, problem: "not-found" },
  ListRatings: { status: 200 },
};

for (const route of ROUTES) {
  test(`${route.name} needs an access token carrying ${route.scope}`, async (t) => {
    const { server } = t.context;
    const send = (authorization: string) =>
      rest(server.baseUrl, route.method, route.path, route.body, { authorization });

    const anonymous = await send("");
    assertProblem(t, anonymous, 401, "without a token");
    t.is(anonymous.body.type, "urn:provision:problem:unauthenticated");
    t.regex(anonymous.headers.get("www-authenticate") ?? "", /^Bearer\b/);

    for (const scopes of [["reporting:read"], nearMissScopes(route.scope)]) {
      const refused = await send(await bearerWithScopes(server, scopes));
      const what = `with ${scopes.join(" ")}`;
      assertProblem(t, refused, 403, what);
      t.is(refused.body.type, "urn:provision:problem:insufficient-scope", what);
      t.true(String(refused.body.detail).includes(route.scope), `${what}: ${refused.body.detail}`);
      const challenge = refused.headers.get("www-authenticate") ?? "";
      t.regex(challenge, /^Bearer\b/, what);
      t.true(challenge.includes('error="insufficient_scope"'), `${what}: ${challenge}`);
      t.true(challenge.includes(`scope="${route.scope}"`), `${what}: ${challenge}`);
    }

    const allowed = await send(await bearerWithScopes(server, [route.scope]));
    t.false([401, 403].includes(allowed.status), `with exactly ${route.scope}: ${JSON.stringify(allowed.body)}`);
    const expected = IMPLEMENTED_SERVICES.has(route.rpc.parent.typeName) ? ALLOWED_OUTCOMES[route.rpc.name] : undefined;
    if (expected) {
      t.is(allowed.status, expected.status, JSON.stringify(allowed.body));
      if (expected.problem) t.is(allowed.body.type, `urn:provision:problem:${expected.problem}`);
    } else {
      t.false(IMPLEMENTED_SERVICES.has(route.rpc.parent.typeName), `${route.rpc.name} needs an expected outcome`);
      t.is(allowed.status, 501, JSON.stringify(allowed.body));
    }
  });
}

test("a token with catalog:* reads and changes the catalog but nothing else", async (t) => {
  const { server } = t.context;
  const authorization = await bearerWithScopes(server, ["catalog:*"]);
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "WILD-AREA" }, { authorization });
  t.is(created.status, 200);
  t.is((await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`, undefined, { authorization })).status, 200);
  const updated = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, { name: "x" }, { authorization });
  t.is(updated.status, 200);
  t.is(
    (await rest(server.baseUrl, "GET", "/api/v1/provision/admin/clients", undefined, { authorization })).status,
    403,
  );
});

test("a token with *:read reads every area but changes none", async (t) => {
  const { server } = t.context;
  const authorization = await bearerWithScopes(server, ["*:read"]);
  t.is((await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization })).status, 200);
  t.is(
    (await rest(server.baseUrl, "GET", "/api/v1/provision/admin/clients", undefined, { authorization })).status,
    200,
  );
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "WILD-READ" }, { authorization });
  t.is(created.status, 403);
  t.true(String(created.body.detail).includes("catalog:create"));
});

test("a token with * does everything", async (t) => {
  const { server } = t.context;
  const authorization = await bearerWithScopes(server, ["*"]);
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "WILD-ALL" }, { authorization });
  t.is(created.status, 200);
  t.is((await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization })).status, 200);
  const client = await rest(
    server.baseUrl,
    "POST",
    "/api/v1/provision/admin/clients",
    { name: "made with *", scopes: ["catalog:read"] },
    { authorization },
  );
  t.is(client.status, 200);
});

test("catalog:write covers creating and updating but not reading", async (t) => {
  const { server } = t.context;
  const authorization = await bearerWithScopes(server, ["catalog:write"]);
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "WRITE-1" }, { authorization });
  t.is(created.status, 200);
  const updated = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, { name: "w" }, { authorization });
  t.is(updated.status, 200);
  const feature = await rest(
    server.baseUrl,
    "POST",
    `${PRODUCTS}/${created.body.id}/features`,
    { featureCode: "f" },
    { authorization },
  );
  t.is(feature.status, 200);
  const imported = await rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [{ productCode: "WRITE-2" }], {
    authorization,
  });
  t.is(imported.status, 200, JSON.stringify(imported.body));
  const read = await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`, undefined, { authorization });
  t.is(read.status, 403);
  t.is((await rest(server.baseUrl, "GET", PRODUCTS, undefined, { authorization })).status, 403);
});

test("catalog:create alone does not update, and catalog:update alone does not create", async (t) => {
  const { server } = t.context;
  const creator = await bearerWithScopes(server, ["catalog:create"]);
  const updater = await bearerWithScopes(server, ["catalog:update"]);
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "SPLIT-1" }, { authorization: creator });
  t.is(created.status, 200);
  const path = `${PRODUCTS}/${created.body.id}`;
  t.is((await rest(server.baseUrl, "PUT", path, { name: "n" }, { authorization: creator })).status, 403);
  t.is((await rest(server.baseUrl, "PUT", path, { name: "n" }, { authorization: updater })).status, 200);
  const second = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "SPLIT-2" }, { authorization: updater });
  t.is(second.status, 403);
  t.is(
    (await rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [], { authorization: creator })).status,
    403,
    "import needs catalog:write, which create alone does not give",
  );
});

// REST authenticates before it reads the body: a caller without a credential learns nothing from validation.
test("without a token, a request with a malformed or mistyped body is refused with 401", async (t) => {
  const { server } = t.context;
  const bodies = ["{nope", JSON.stringify({ productCode: 42 }), JSON.stringify([1])];
  for (const body of bodies) {
    const response = await fetch(server.baseUrl + PRODUCTS, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    t.is(response.status, 401, `${body}: ${await response.text()}`);
  }
});
