import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { UsageService } from "../../gen/provision/v1/usage_pb.js";
import type { ServiceImplementation } from "../../src/server/in-process-rpc.js";
import { ENTITLEMENTS, sessionIdOf, sessionPath } from "../support/licensing.js";
import {
  API_CALLS,
  assetUsageOf,
  meteredEntitlement,
  meteredSession,
  preallocate,
  preallocatePath,
  sendUsage,
  usageItems,
} from "../support/metering.js";
import type { LicensedSession } from "../support/observability.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// A REST pre-allocation whose token the instance verified before is answered without the full pipeline
// (preallocation-fast-route.ts); these tests hold it to the pipeline's answers, and count which of the two
// answered through the implementation the full pipeline calls.

interface Context {
  servers: Record<string, TestServer>;
  /** Pre-allocations the full pipeline handed to the implementation, by mode. */
  pipelineCalls: Record<string, number>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];
const INFORMATIONAL = { metricName: "notes", name: "Notes", unit: "note", metricType: 0 };

/** The implementations, with UsageService.TryPreallocate counted in `count`. */
function countingPreallocations(count: () => void) {
  return (implementations: ServiceImplementation[]): ServiceImplementation[] =>
    implementations.map(([service, impl]) => {
      if (service !== UsageService) return [service, impl];
      const methods = impl as Record<string, (...args: unknown[]) => unknown>;
      const tryPreallocate = methods.tryPreallocate;
      return [
        service,
        {
          ...methods,
          tryPreallocate: (...args: unknown[]) => {
            count();
            return tryPreallocate(...args);
          },
        },
      ];
    });
}

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-preallocate-"));
  t.context.servers = {};
  t.context.pipelineCalls = {};
  for (const mode of MODES) {
    t.context.pipelineCalls[mode] = 0;
    const services = countingPreallocations(() => t.context.pipelineCalls[mode]++);
    t.context.servers[mode] = await startTestServer(
      mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") }, services } : { services },
    );
  }
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** A session whose token the server has verified once (by a first pre-allocation, through the full pipeline). */
async function rememberedSession(server: TestServer, assets: Record<string, unknown>[] = [API_CALLS]) {
  const entitlement = await meteredEntitlement(server.baseUrl, assets);
  const session = await meteredSession(server.baseUrl, entitlement);
  const first = await preallocate(server.baseUrl, session, "api-calls", 1);
  if (first.status !== 200) throw new Error(`first pre-allocation: ${JSON.stringify(first.body)}`);
  return { entitlement, session, first: first.body as Record<string, unknown> };
}

function preallocateRaw(server: TestServer, session: LicensedSession, metric: string, query: string) {
  return rest(
    server.baseUrl,
    "POST",
    preallocatePath(session.sessionId, metric, "").replace("amount=", query),
    undefined,
    {
      authorization: session.authorization,
    },
  );
}

each("a remembered token's pre-allocation answers as the full pipeline did, without it", async (t, mode) => {
  const server = t.context.servers[mode];
  const before = t.context.pipelineCalls[mode];
  const { session, first } = await rememberedSession(server);
  t.is(t.context.pipelineCalls[mode], before + 1, "the first went through the full pipeline");
  t.like(first, { granted: true, currentValue: 1 });
  const second = await preallocate(server.baseUrl, session, "api-calls", 2.5);
  t.is(second.status, 200);
  t.deepEqual(Object.keys(second.body), Object.keys(first));
  t.deepEqual(second.body, { ...first, currentValue: 3.5, usagePercentage: 3.5 });
  t.is(t.context.pipelineCalls[mode], before + 1, "the second did not");

  const blocked = await preallocate(server.baseUrl, session, "api-calls", 200);
  t.is(blocked.status, 200, "a refusal is an answer");
  t.like(blocked.body, { granted: false, currentValue: 3.5 });
  t.is(t.context.pipelineCalls[mode], before + 1);
});

each("a remembered token's unusual pre-allocation is left to the full pipeline, which answers it", async (t, mode) => {
  const server = t.context.servers[mode];
  const { entitlement, session } = await rememberedSession(server, [API_CALLS, INFORMATIONAL]);
  const other = await meteredSession(server.baseUrl, entitlement);
  let calls = t.context.pipelineCalls[mode];
  const expectPipeline = (what: string) => {
    t.is(t.context.pipelineCalls[mode], ++calls, what);
  };

  t.like((await preallocateRaw(server, session, "api-calls", "amount=1e0")).body, { granted: true, currentValue: 2 });
  expectPipeline("an amount in exponent notation");
  t.like((await preallocateRaw(server, session, "api-calls", "amount=1&note=x")).body, { currentValue: 3 });
  expectPipeline("a query with another parameter");
  const zero = await preallocateRaw(server, session, "api-calls", "amount=0");
  t.is(zero.status, 400);
  expectPipeline("an amount refused");
  for (const amount of ["0x10", "0b101", "%205", ".5", "5.", "Infinity", ""]) {
    const notDecimal = await preallocateRaw(server, session, "api-calls", `amount=${amount}`);
    t.is(notDecimal.status, 400, `${amount}: ${JSON.stringify(notDecimal.body)}`);
    t.is(notDecimal.body.errors?.[0]?.field, "amount", amount);
  }
  t.is(t.context.pipelineCalls[mode], calls, "refused by the REST decoding, before any call");
  const unknown = await preallocate(server.baseUrl, session, "no-such-metric", 1);
  t.is(unknown.status, 404);
  t.is(unknown.body.type, "urn:provision:problem:metric-not-found");
  expectPipeline("an unknown metric");
  t.is((await preallocate(server.baseUrl, session, "notes", 1)).status, 400);
  expectPipeline("an informational metric");

  const otherPath = await rest(server.baseUrl, "POST", preallocatePath(other.sessionId, "api-calls", 1), undefined, {
    authorization: session.authorization,
  });
  t.is(otherPath.status, 403);
  t.is(otherPath.body.type, "urn:provision:problem:wrong-session");

  const ended = await rest(
    server.baseUrl,
    "DELETE",
    `${ENTITLEMENTS}/${entitlement.entitlementId}/sessions/${sessionIdOf(session.authorization.slice(7))}`,
  );
  t.is(ended.status, 200, JSON.stringify(ended.body));
  const afterEnd = await preallocate(server.baseUrl, session, "api-calls", 1);
  t.is(afterEnd.status, 401);
  t.is(afterEnd.body.type, "urn:provision:problem:session-ended");
});

each("64 remembered pre-allocations racing on one instance grant exactly what the tiers allow", async (t, mode) => {
  const server = t.context.servers[mode];
  const { entitlement, session } = await rememberedSession(server);
  const sessions = [session, ...(await Promise.all([1, 2, 3].map(() => meteredSession(server.baseUrl, entitlement))))];
  for (const other of sessions.slice(1)) await preallocate(server.baseUrl, other, "api-calls", 1);
  const calls = t.context.pipelineCalls[mode];
  const answers = await Promise.all(
    Array.from({ length: 64 }, (_, index) => preallocate(server.baseUrl, sessions[index % 4], "api-calls", 2.5)),
  );
  t.is(t.context.pipelineCalls[mode], calls, "all answered by the fast route");
  t.true(answers.every((answer) => answer.status === 200));
  const granted = answers.filter((answer) => answer.body.granted).length;
  // 4 taken by the first pre-allocations; the Block tier starts at 120: (120 - 4) / 2.5 = 46.4.
  t.is(granted, 46);
  const usage = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlement.entitlementId}/usage`);
  t.is(usage.status, 200, JSON.stringify(usage.body));
  t.is(usage.body.assets[0].consumption, 119);
  const [{ records }] = (await server.app.dataSource.query(
    "SELECT COUNT(*) AS records FROM usage_records WHERE entitlement_id = ?",
    [entitlement.entitlementId],
  )) as { records: number | string }[];
  t.is(Number(records), 4 + 46, "each grant recorded once, durably");
});

each(
  "a license no longer running is refused pre-allocation (403 as renew), its consumed usage still reported",
  async (t, mode) => {
    const server = t.context.servers[mode];
    const { entitlement, session } = await rememberedSession(server);
    const entitlementPath = `${ENTITLEMENTS}/${entitlement.entitlementId}`;
    const change = async (body: Record<string, unknown>) => {
      const changed = await rest(server.baseUrl, "PUT", entitlementPath, body);
      t.is(changed.status, 200, JSON.stringify(changed.body));
    };
    const refusedAs = async (slug: string) => {
      const calls = t.context.pipelineCalls[mode];
      const refused = await preallocate(server.baseUrl, session, "api-calls", 1);
      t.is(refused.status, 403, JSON.stringify(refused.body));
      t.is(refused.body.type, `urn:provision:problem:${slug}`);
      t.is(t.context.pipelineCalls[mode], calls + 1, "the fast route left it to the pipeline");
      const renewed = await rest(
        server.baseUrl,
        "POST",
        sessionPath(session.sessionId, "renew"),
        {},
        {
          authorization: session.authorization,
        },
      );
      t.is(renewed.body.type, refused.body.type, "as renew answers");
    };

    await change({ isRevoked: true });
    await refusedAs("entitlement-revoked");
    const reported = await sendUsage(server.baseUrl, session, usageItems("api-calls", [2]));
    t.is(reported.status, 200, JSON.stringify(reported.body));
    await change({ isRevoked: false });
    t.like((await preallocate(server.baseUrl, session, "api-calls", 1)).body, { granted: true, currentValue: 4 });

    await change({ expirationDateTime: new Date(Date.now() - 60_000).toISOString() });
    await refusedAs("entitlement-expired");
    await change({ expirationDateTime: new Date(Date.now() + 86_400_000).toISOString() });

    await change({
      activationPolicy: {
        claimBasedActivation: { numberOfSeats: 1000, isFloatingLicense: true },
        subscriptionPolicy: { renewPeriod: "month", isSubscriptionActive: true, subscriptionPeriodsLeft: -1 },
      },
    });
    t.like((await preallocate(server.baseUrl, session, "api-calls", 1)).body, { granted: true });
    const subscription = await rest(
      server.baseUrl,
      "PUT",
      `/api/v1/provision/operational/entitlement/entitlements/${entitlement.entitlementId}/policies/subscription/active`,
      { isSubscriptionActive: false },
    );
    t.is(subscription.status, 200, JSON.stringify(subscription.body));
    await refusedAs("subscription-inactive");
    const usage = await assetUsageOf(server.baseUrl, entitlement.entitlementId, "api-calls");
    t.is(usage.consumption, 5, "the refusals reserved nothing");
  },
);
