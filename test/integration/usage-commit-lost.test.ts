import anyTest, { type TestFn } from "ava";
import { type CuttingProxy, startCuttingProxy } from "../support/cutting-proxy.js";
import {
  API_CALLS,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageItems,
} from "../support/metering.js";
import { pollUntil } from "../support/poll.js";
import { startBehindProxy, type TestServer } from "../support/test-server.js";

// The connection to MySQL lost between a usage write's COMMIT and its answer: the write may have committed. Its
// counter reservation must neither be given back (the records may be there: the counter would then fall below
// them and let later grants pass the Block tier) nor kept blindly: the counter is recounted from the records.
const test = anyTest as TestFn<{ server: TestServer; proxy: CuttingProxy; close: () => Promise<void> }>;

test.before(async (t) => {
  Object.assign(t.context, await startBehindProxy(startCuttingProxy));
});

test.after.always(async (t) => {
  await t.context.close?.();
});

async function recordedUnits(server: TestServer, entitlementId: string): Promise<number> {
  const [row] = (await server.app.dataSource.query(
    "SELECT COALESCE(SUM(amount), 0) AS total FROM usage_records WHERE entitlement_id = ?",
    [entitlementId],
  )) as { total: unknown }[];
  return Number(row.total) / 1e6;
}

test.serial(
  "a pre-allocation whose COMMIT's answer is lost: 503, and the counter holds what was recorded",
  async (t) => {
    const { server, proxy } = t.context;
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
    const session = await meteredSession(server.baseUrl, entitlement);
    t.true((await preallocate(server.baseUrl, session, "api-calls", 10)).body.granted);
    proxy.arm("usage_records");
    const lost = await preallocate(server.baseUrl, session, "api-calls", 10);
    t.is(proxy.cuts(), 1);
    t.is(lost.status, 503, JSON.stringify(lost.body));
    t.is(lost.body.type, "urn:provision:problem:outcome-unknown");
    // Committed, or rolled back when the connection was ended first: the counter holds what the records hold.
    const recorded = await recordedUnits(server, entitlement.entitlementId);
    t.true(recorded === 10 || recorded === 20, String(recorded));
    const next = await preallocate(server.baseUrl, session, "api-calls", 1);
    t.like(next.body, { granted: true, currentValue: recorded + 1 });
  },
);

test.serial("a usage batch whose COMMIT's answer is lost: sent again, it is counted once", async (t) => {
  const { server, proxy } = t.context;
  const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
  const session = await meteredSession(server.baseUrl, entitlement);
  // Its counter made first (a rebuild from the records, a transaction of its own).
  t.is((await sendUsage(server.baseUrl, session, usageItems("api-calls", [1], 100))).status, 200);
  const batch = usageItems("api-calls", [5, 5, 5]);
  proxy.arm("usage_records");
  const lost = await sendUsage(server.baseUrl, session, batch);
  t.is(proxy.cuts(), 2);
  t.is(lost.status, 503, JSON.stringify(lost.body));
  const again = await sendUsage(server.baseUrl, session, batch);
  t.is(again.body.acceptedCount + again.body.duplicateCount, 3, JSON.stringify(again.body));
  t.is(await recordedUnits(server, entitlement.entitlementId), 16);
  const next = await preallocate(server.baseUrl, session, "api-calls", 1);
  t.like(next.body, { granted: true, currentValue: 17 });
});

test.serial("MySQL down at a pre-allocation's COMMIT: the counter is recounted once it is back", async (t) => {
  const { server, proxy } = t.context;
  const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
  const session = await meteredSession(server.baseUrl, entitlement);
  t.true((await preallocate(server.baseUrl, session, "api-calls", 10)).body.granted);
  proxy.armOutage(1500, "usage_records");
  const lost = await preallocate(server.baseUrl, session, "api-calls", 10);
  t.is(lost.status, 503, JSON.stringify(lost.body));
  t.is(lost.body.type, "urn:provision:problem:outcome-unknown");
  // A refused pre-allocation reserves nothing and answers the counter as it stands.
  const counter = async () => (await preallocate(server.baseUrl, session, "api-calls", 1_000_000)).body.currentValue;
  const recounted = await pollUntil(
    "the counter to be recounted from the records",
    async () => {
      const value = await counter().catch(() => undefined);
      return value === 10 ? value : undefined;
    },
    { timeoutMs: 15_000, intervalMs: 250 },
  );
  t.is(recounted, 10);
  t.is(await recordedUnits(server, entitlement.entitlementId), 10, "the COMMIT never reached MySQL");
  t.like((await preallocate(server.baseUrl, session, "api-calls", 110)).body, { granted: true, currentValue: 120 });
});
