import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import {
  CatalogService,
  CreateProductRequestSchema,
  type CreateProductResponse,
  ListProductsRequestSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { clientMethods, IMPLEMENTED_SERVICES, nearMissScopes } from "../support/contract.js";
import { authorizationMetadata, bearerWithScopes, sendAuthorization } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

const METHODS = clientMethods();

/** What each implemented procedure answers an empty request from a caller with exactly its scope; OK is success. */
const EMPTY_REQUEST_OUTCOMES: Record<string, Code | "OK"> = {
  ListProducts: "OK",
  GetProduct: Code.InvalidArgument,
  CreateProduct: Code.InvalidArgument,
  UpdateProduct: Code.InvalidArgument,
  ImportProducts: "OK",
  AddFeature: Code.InvalidArgument,
  UpdateFeature: Code.InvalidArgument,
  AddMonitoredResource: Code.InvalidArgument,
  UpdateMonitoredResource: Code.InvalidArgument,
  CreateClient: Code.InvalidArgument,
  ListClients: "OK",
  GetClient: Code.NotFound,
  RotateClientSecret: Code.NotFound,
  SetClientEnabled: Code.InvalidArgument,
  DeleteClient: Code.NotFound,
  CreateEntitlement: "OK",
  GetEntitlement: Code.InvalidArgument,
  ListEntitlements: "OK",
  UpdateEntitlement: Code.InvalidArgument,
  ConvertToTemplate: Code.InvalidArgument,
  CreateFromTemplate: Code.InvalidArgument,
  CreateActivationCode: Code.InvalidArgument,
  SetActivationEnabled: Code.InvalidArgument,
  SetClaimBasedSeats: Code.InvalidArgument,
  SetSubscriptionActive: Code.InvalidArgument,
  ListActivationCodes: Code.InvalidArgument,
  DeleteActivationCode: Code.InvalidArgument,
  ListSessions: Code.InvalidArgument,
  EndSession: Code.InvalidArgument,
  CreateSubscription: Code.InvalidArgument,
  ListSubscriptions: "OK",
  GetSubscription: Code.InvalidArgument,
  UpdateSubscription: Code.InvalidArgument,
  DeleteSubscription: Code.InvalidArgument,
  TestFireSubscription: Code.InvalidArgument,
  RotateSubscriptionSecret: Code.InvalidArgument,
  VerifySubscription: Code.InvalidArgument,
  ListDeliveries: Code.InvalidArgument,
  GetDelivery: Code.InvalidArgument,
  RequeueDelivery: Code.InvalidArgument,
  RequeueFailedDeliveries: Code.InvalidArgument,
  GetEntitlementUsage: Code.InvalidArgument,
  ListUsageTransactions: Code.InvalidArgument,
  AddCredits: Code.InvalidArgument,
  ListSessionLogs: Code.InvalidArgument,
  ListSessionMetrics: Code.InvalidArgument,
  ListRatings: "OK",
};

/** The expected outcome of an empty request, as a Connect code (undefined: success); fails for a missing entry. */
function expectedOutcome(t: ExecutionContext, rpc: (typeof METHODS)[number]["rpc"]): Code | undefined {
  const expected = EMPTY_REQUEST_OUTCOMES[rpc.name];
  t.not(expected, undefined, `${rpc.name} needs an expected outcome`);
  return expected === "OK" ? undefined : expected;
}

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** The grpc-js error of a unary call, or undefined when it succeeded. */
async function grpcOutcome(
  server: TestServer,
  rpc: (typeof METHODS)[number]["rpc"],
  metadata?: grpc.Metadata,
): Promise<grpc.ServiceError | undefined> {
  const client = grpcClient(rpc.parent, `127.0.0.1:${server.port}`);
  try {
    await client.call(rpc.localName, create(rpc.input), metadata);
    return undefined;
  } catch (error) {
    return error as grpc.ServiceError;
  } finally {
    client.close();
  }
}

/** The ConnectError of a unary call over the Connect protocol, or undefined when it succeeded. */
async function connectOutcome(
  server: TestServer,
  rpc: (typeof METHODS)[number]["rpc"],
  interceptors: Interceptor[],
): Promise<ConnectError | undefined> {
  const transport = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1", interceptors });
  const client = createClient(rpc.parent, transport) as unknown as Record<
    string,
    (request: unknown) => Promise<unknown>
  >;
  try {
    await client[rpc.localName]({});
    return undefined;
  } catch (error) {
    return ConnectError.from(error);
  }
}

function challengeOf(t: ExecutionContext, header: string | undefined, what: string) {
  t.regex(header ?? "", /^Bearer realm="provision"/, `${what}: ${header}`);
  return header ?? "";
}

test("the client RPCs cover every service but the session calls (activation, usage, observability, feedback)", (t) => {
  const services = new Set(METHODS.map(({ rpc }) => rpc.parent.name));
  t.deepEqual([...services].sort(), [
    "CatalogService",
    "ClientAdminService",
    "EntitlementService",
    "UsageAdminService",
    "WebhookService",
  ]);
});

for (const { rpc, scope } of METHODS) {
  test(`grpc-js: ${rpc.parent.name}/${rpc.name} answers UNAUTHENTICATED without a token and PERMISSION_DENIED without ${scope}`, async (t) => {
    const { server } = t.context;
    const anonymous = await grpcOutcome(server, rpc);
    t.is(anonymous?.code, grpc.status.UNAUTHENTICATED, anonymous?.details);
    challengeOf(t, anonymous?.metadata.get("www-authenticate")[0] as string | undefined, "without a token");

    const refused = await grpcOutcome(
      server,
      rpc,
      authorizationMetadata(await bearerWithScopes(server, nearMissScopes(scope))),
    );
    t.is(refused?.code, grpc.status.PERMISSION_DENIED, refused?.details);
    // connect-node percent-encodes grpc-message with encodeURIComponent, grpc-js decodes it with decodeURI,
    // which leaves `%3A` for the scope's colon: decode the rest here.
    const details = decodeURIComponent(refused?.details ?? "");
    t.true(details.includes(scope), details);
    const challenge = challengeOf(t, refused?.metadata.get("www-authenticate")[0] as string | undefined, "near miss");
    t.true(challenge.includes('error="insufficient_scope"'), challenge);

    const allowed = await grpcOutcome(server, rpc, authorizationMetadata(await bearerWithScopes(server, [scope])));
    if (IMPLEMENTED_SERVICES.has(rpc.parent.typeName)) {
      // Connect's codes are gRPC's status numbers.
      t.is(allowed?.code, expectedOutcome(t, rpc) as number | undefined, allowed?.details);
    } else t.is(allowed?.code, grpc.status.UNIMPLEMENTED, allowed?.details);
  });

  test(`Connect: ${rpc.parent.name}/${rpc.name} answers unauthenticated without a token and permission_denied without ${scope}`, async (t) => {
    const { server } = t.context;
    const anonymous = await connectOutcome(server, rpc, []);
    t.is(anonymous?.code, Code.Unauthenticated, anonymous?.message);
    challengeOf(t, anonymous?.metadata.get("www-authenticate") ?? undefined, "without a token");

    const nearMiss = await bearerWithScopes(server, nearMissScopes(scope));
    const refused = await connectOutcome(server, rpc, [sendAuthorization(nearMiss)]);
    t.is(refused?.code, Code.PermissionDenied, refused?.message);
    t.true(refused?.rawMessage.includes(scope), refused?.rawMessage);

    const exact = await bearerWithScopes(server, [scope]);
    const allowed = await connectOutcome(server, rpc, [sendAuthorization(exact)]);
    if (IMPLEMENTED_SERVICES.has(rpc.parent.typeName)) t.is(allowed?.code, expectedOutcome(t, rpc), allowed?.message);
    else t.is(allowed?.code, Code.Unimplemented, allowed?.message);
  });
}

test("grpc-js and Connect refuse a forged token as unauthenticated and accept the server's own", async (t) => {
  const { server } = t.context;
  const forged = "Bearer eyJhbGciOiJub25lIn0.eyJzY29wZSI6IioifQ.";
  const client = grpcClient(CatalogService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const grpcError = await t.throwsAsync<grpc.ServiceError>(
    client.call("listProducts", create(ListProductsRequestSchema), authorizationMetadata(forged)),
  );
  t.is(grpcError?.code, grpc.status.UNAUTHENTICATED);
  const connectError = await connectOutcome(server, CatalogService.method.listProducts, [sendAuthorization(forged)]);
  t.is(connectError?.code, Code.Unauthenticated);

  const created = await client.call<CreateProductResponse>(
    "createProduct",
    create(CreateProductRequestSchema, { productCode: "RPC-OWN" }),
    authorizationMetadata(server.adminAuthorization),
  );
  t.is(created.product?.productCode, "RPC-OWN");
});
