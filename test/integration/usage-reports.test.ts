import { create } from "@bufbuild/protobuf";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import { UsageAdminService } from "../../gen/provision/v1/usage_admin_pb.js";
import {
  RecordUsageTransactionsRequestSchema,
  TryPreallocateRequestSchema,
  type TryPreallocateResponse,
  UsageService,
} from "../../gen/provision/v1/usage_pb.js";
import { accessToken } from "../support/auth.js";
import { authorizationMetadata, sendAuthorization } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { sessionCall } from "../support/licensing.js";
import {
  API_CALLS,
  CREDITS,
  creditsPath,
  entitlementUsagePath,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageItems,
} from "../support/metering.js";
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

test("GetEntitlementUsage shows each asset's period, consumption, tier and balance", async (t) => {
  const { baseUrl } = t.context.server;
  const entitlement = await meteredEntitlement(baseUrl, [API_CALLS, CREDITS]);
  const session = await meteredSession(baseUrl, entitlement);
  await sendUsage(baseUrl, session, [...usageItems("api-calls", [60, 45]), ...usageItems("credits", [12.5], 3)]);
  const answer = await rest(baseUrl, "GET", entitlementUsagePath(entitlement.entitlementId));
  t.is(answer.status, 200);
  const byMetric = Object.fromEntries(
    answer.body.assets.map((asset: { metricName: string }) => [asset.metricName, asset]),
  );
  t.like(byMetric["api-calls"], {
    metricType: 1,
    consumption: 105,
    tier: "Overage",
    severity: 2,
    quotaUsagePolicy: 2,
    limit: 120,
    productId: entitlement.productId,
  });
  const start = new Date(byMetric["api-calls"].periodStart);
  t.is(start.getUTCDate(), 1, "P1M periods are calendar months");
  t.like(byMetric.credits, {
    metricType: 2,
    consumption: 12.5,
    limit: 50,
    creditsLeft: 37.5,
    balanceStatus: 1,
    cumulativeCreditsUsed: 12.5,
  });

  const open = { ...API_CALLS, metricName: "open", meteredUsage: { ...API_CALLS.meteredUsage, usageTiers: [] } };
  const closed = {
    ...API_CALLS,
    metricName: "closed",
    meteredUsage: {
      ...API_CALLS.meteredUsage,
      usageTiers: [{ name: "None", startUsage: 0, endUsage: 0, quotaUsageLevel: 4, quotaUsagePolicy: 3 }],
    },
  };
  const unlimited = { metricName: "unlimited", name: "U", metricType: 2, balanceUsage: { isUnlimitedCredits: true } };
  const limits = await meteredEntitlement(baseUrl, [open, closed, unlimited]);
  const shown = await rest(baseUrl, "GET", entitlementUsagePath(limits.entitlementId));
  t.deepEqual(
    Object.fromEntries(
      shown.body.assets.map((asset: { metricName: string; limit: unknown }) => [asset.metricName, asset.limit]),
    ),
    { open: null, closed: 0, unlimited: null },
    "no limit is null; a Block tier from 0 is 0",
  );
});

test("ListUsageTransactions pages and filters by metric, session and time", async (t) => {
  const { baseUrl } = t.context.server;
  const entitlement = await meteredEntitlement(baseUrl, [API_CALLS, CREDITS]);
  const [first, second] = [await meteredSession(baseUrl, entitlement), await meteredSession(baseUrl, entitlement)];
  await sendUsage(baseUrl, first, usageItems("api-calls", [1, 2, 3]));
  await sendUsage(baseUrl, second, usageItems("credits", [4]));
  await preallocate(baseUrl, second, "api-calls", 5);
  const list = (query: string) =>
    rest(baseUrl, "GET", `${entitlementUsagePath(entitlement.entitlementId)}/transactions${query}`);
  const all = await list("?pageSize=2");
  t.like(all.body, { totalCount: 5, totalPages: 3, hasNextPage: true, currentPage: 1, pageSize: 2 });
  t.like((await list("?metric=api-calls")).body, { totalCount: 4 });
  const ofSecond = await list(`?sessionId=${second.sessionId}`);
  t.deepEqual(ofSecond.body.items.map((item: { kind: string; amount: number }) => [item.kind, item.amount]).sort(), [
    ["preallocation", 5],
    ["transaction", 4],
  ]);
  const future = new Date(Date.now() + 3_600_000).toISOString();
  t.like((await list(`?from=${future}`)).body, { totalCount: 0, items: [] });
  t.like((await list(`?to=${future}&metric=credits`)).body, { totalCount: 1 });
  t.is((await list("?sessionId=not-a-uuid")).status, 400);
});

test("another provider's entitlement is not found by the reports or the top-up", async (t) => {
  const { server } = t.context;
  const entitlement = await meteredEntitlement(server.baseUrl, [CREDITS]);
  const other = await createProviderWithClient(server);
  const authorization = `Bearer ${await accessToken(server.baseUrl, other.clientId, other.clientSecret)}`;
  const headers = { authorization };
  const usage = await rest(server.baseUrl, "GET", entitlementUsagePath(entitlement.entitlementId), undefined, headers);
  t.is(usage.status, 404);
  const path = `${entitlementUsagePath(entitlement.entitlementId)}/transactions`;
  t.is((await rest(server.baseUrl, "GET", path, undefined, headers)).status, 404);
  const topUp = await rest(
    server.baseUrl,
    "POST",
    creditsPath(entitlement.entitlementId, "credits"),
    { amount: 5 },
    headers,
  );
  t.is(topUp.status, 404);
  const mine = await rest(server.baseUrl, "GET", entitlementUsagePath(entitlement.entitlementId));
  t.is(mine.body.assets[0].limit, 50, "the refused top-up changed nothing");
});

test("a batch of more than 1,000 items answers 413 before any work", async (t) => {
  const { baseUrl } = t.context.server;
  const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
  const session = await meteredSession(baseUrl, entitlement);
  const tooMany = await sendUsage(baseUrl, session, usageItems("api-calls", Array(1001).fill(0.01)));
  t.is(tooMany.status, 413);
  t.is(tooMany.body.type, "urn:provision:problem:too-many-items");
  const justRight = await sendUsage(baseUrl, session, usageItems("api-calls", Array(1000).fill(0.01)));
  t.deepEqual(justRight.body, { acceptedCount: 1000, duplicateCount: 0 });
  for (const notABatch of [{ transactionId: 1 }, "1 item"]) {
    const refused = await sendUsage(baseUrl, session, notABatch as unknown as unknown[]);
    t.is(refused.status, 400, "a body that is not an array is invalid, not too large");
    t.is(refused.body.type, "urn:provision:problem:validation");
  }
});

test("usage calls refuse another session's token, and a released session's", async (t) => {
  const { baseUrl } = t.context.server;
  const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
  const [mine, theirs] = [await meteredSession(baseUrl, entitlement), await meteredSession(baseUrl, entitlement)];
  const wrong = await rest(baseUrl, "POST", `/api/v1/provision/usage/sessions/${theirs.sessionId}/transactions`, [], {
    authorization: mine.authorization,
  });
  t.is(wrong.status, 403);
  t.is((await preallocate(baseUrl, { ...mine, sessionId: theirs.sessionId }, "api-calls", 1)).status, 403);
  await sessionCall(baseUrl, mine.authorization.slice("Bearer ".length), "release");
  const released = await preallocate(baseUrl, mine, "api-calls", 1);
  t.is(released.status, 401);
  t.is(released.body.type, "urn:provision:problem:session-released");
  t.is((await sendUsage(baseUrl, mine, usageItems("api-calls", [1]))).status, 401);
  t.is((await preallocate(baseUrl, theirs, "nope", 1)).body.type, "urn:provision:problem:metric-not-found");
  t.is((await preallocate(baseUrl, theirs, "api-calls", 0)).status, 400);
});

test("pre-allocation over gRPC and the usage report over Connect", async (t) => {
  const { server } = t.context;
  const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
  const session = await meteredSession(server.baseUrl, entitlement);
  const client = grpcClient(UsageService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const answer = await client.call<TryPreallocateResponse>(
    "tryPreallocate",
    create(TryPreallocateRequestSchema, { sessionId: session.sessionId, metric: "api-calls", amount: 101 }),
    authorizationMetadata(session.authorization),
  );
  t.like(answer.preallocationResult, { granted: true, currentValue: 101, tier: "Overage" });
  const transport = createConnectTransport({
    baseUrl: server.baseUrl,
    httpVersion: "1.1",
    interceptors: [sendAuthorization(server.adminAuthorization)],
  });
  const usage = await createClient(UsageAdminService, transport).getEntitlementUsage({
    entitlementId: entitlement.entitlementId,
  });
  t.is(usage.assets[0].consumption, 101);
});

test("an auto-balance schedule that is not a cron expression is refused when the asset is written", async (t) => {
  const { baseUrl } = t.context.server;
  const product = await rest(baseUrl, "POST", PRODUCTS, { productCode: `CRON-${Date.now()}`, productVersion: "1" });
  const asset = { ...CREDITS, balanceUsage: { ...CREDITS.balanceUsage, autoBalanceCronSchedule: "every day" } };
  const refused = await rest(baseUrl, "POST", `${PRODUCTS}/${product.body.id}/monitored-resources`, asset);
  t.is(refused.status, 400);
  t.is(refused.body.errors[0].field, "balanceUsage.autoBalanceCronSchedule");
});

test("an instant no date can hold answers 400 over gRPC and Connect, never 500", async (t) => {
  const { server } = t.context;
  const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
  const session = await meteredSession(server.baseUrl, entitlement);
  const client = grpcClient(UsageService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const farAway = { seconds: 10n ** 15n, nanos: 0 };
  const error = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "recordUsageTransactions",
      create(RecordUsageTransactionsRequestSchema, {
        sessionId: session.sessionId,
        events: [{ transactionId: 1n, eventName: "api-calls", eventData: "1", creationDateTime: farAway }],
      }),
      authorizationMetadata(session.authorization),
    ),
  );
  t.is(error?.code, grpc.status.INVALID_ARGUMENT, error?.details);
  const transport = createConnectTransport({
    baseUrl: server.baseUrl,
    httpVersion: "1.1",
    interceptors: [sendAuthorization(server.adminAuthorization)],
  });
  const listing = createClient(UsageAdminService, transport).listUsageTransactions({
    entitlementId: entitlement.entitlementId,
    from: farAway,
  });
  const refused = await t.throwsAsync<ConnectError>(listing);
  t.is(refused?.code, Code.InvalidArgument);
});
