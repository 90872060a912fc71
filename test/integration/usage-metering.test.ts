import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import {
  API_CALLS,
  CREDITS,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageEventsOf,
  usageItems,
} from "../support/metering.js";
import type { LicensedSession } from "../support/observability.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { keepOutboxEvents } from "../support/webhooks.js";

const test = anyTest as TestFn<{ servers: Record<"mysql" | "embedded", TestServer>; directory: string }>;

test.before(async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-usage-"));
  t.context.directory = directory;
  t.context.servers = {
    mysql: await startTestServer(),
    embedded: await startTestServer({ embedded: { file: path.join(directory, "usage.sqlite") } }),
  };
  for (const server of Object.values(t.context.servers)) await keepOutboxEvents(server);
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.directory, { recursive: true, force: true });
});

async function assetIdOf(server: TestServer, entitlementId: string, metric: string): Promise<string> {
  const [row] = (await server.app.dataSource.query(
    "SELECT id FROM monitored_assets WHERE entitlement_id = ? AND metric_name = ?",
    [entitlementId, metric],
  )) as { id: string }[];
  return row.id;
}

/** The period's consumption as a pre-allocation of the smallest amount sees it (that amount included). */
async function consumptionSeen(t: ExecutionContext, baseUrl: string, session: LicensedSession, metric: string) {
  const answer = await preallocate(baseUrl, session, metric, 0.000001);
  t.is(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.currentValue as number;
}

for (const kind of ["mysql", "embedded"] as const) {
  test(`${kind}: a usage batch is recorded once; a replayed batch counts its items as duplicates`, async (t) => {
    const { baseUrl } = t.context.servers[kind];
    const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
    const session = await meteredSession(baseUrl, entitlement);
    const first = await sendUsage(baseUrl, session, usageItems("api-calls", [10, 2.5, 0.25]));
    t.is(first.status, 200, JSON.stringify(first.body));
    t.deepEqual(first.body, { acceptedCount: 3, duplicateCount: 0 });
    const replay = await sendUsage(baseUrl, session, usageItems("api-calls", [10, 2.5, 0.25, 1]));
    t.deepEqual(replay.body, { acceptedCount: 1, duplicateCount: 3 });
    t.is(await consumptionSeen(t, baseUrl, session, "api-calls"), 13.750001);
  });

  test(`${kind}: transactionIds past 2^53 are told apart to the last digit`, async (t) => {
    const { baseUrl } = t.context.servers[kind];
    const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
    const session = await meteredSession(baseUrl, entitlement);
    const ids = ["9007199254740992", "9007199254740993", "9223372036854775807"];
    const item = (transactionId: string) => ({ transactionId, eventName: "api-calls", eventData: "1" });
    const first = await sendUsage(baseUrl, session, ids.map(item));
    t.deepEqual(first.body, { acceptedCount: 3, duplicateCount: 0 }, JSON.stringify(first.body));
    // A JSON number past 2^53, as a 64-bit client writes it: one more than an id already recorded.
    const response = await fetch(`${baseUrl}/api/v1/provision/usage/sessions/${session.sessionId}/transactions`, {
      method: "POST",
      headers: { authorization: session.authorization, "content-type": "application/json" },
      body:
        '[{"transactionId":9007199254740993,"eventName":"api-calls","eventData":"1"},' +
        '{"transactionId":9007199254740994,"eventName":"api-calls","eventData":"1"}]',
    });
    t.deepEqual(await response.json(), { acceptedCount: 1, duplicateCount: 1 });
    const listed = await rest(
      baseUrl,
      "GET",
      `/api/v1/provision/admin/entitlements/${entitlement.entitlementId}/usage/transactions?pageSize=10`,
    );
    t.is(listed.status, 200, JSON.stringify(listed.body));
    const recorded = listed.body.items.map((record: { transactionId: string }) => String(record.transactionId));
    t.deepEqual(recorded.sort(), [...ids, "9007199254740994"].sort());
    t.is(await consumptionSeen(t, baseUrl, session, "api-calls"), 4.000001);
  });

  test(`${kind}: a batch with one bad item stores nothing and names the item`, async (t) => {
    const { baseUrl } = t.context.servers[kind];
    const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
    const session = await meteredSession(baseUrl, entitlement);
    const items = [...usageItems("api-calls", [5, 5]), { transactionId: 3, eventName: "api-calls", eventData: '"x"' }];
    const refused = await sendUsage(baseUrl, session, items);
    t.is(refused.status, 400);
    t.is(refused.body.errors[0].field, "events[2].eventData");
    const unknownMetric = await sendUsage(baseUrl, session, [{ transactionId: 9, eventName: "nope", eventData: "1" }]);
    t.is(unknownMetric.status, 400);
    t.is(unknownMetric.body.errors[0].field, "events[0].eventName");
    const future = new Date(Date.now() + 10 * 60_000).toISOString();
    const dated = await sendUsage(baseUrl, session, [
      { transactionId: 10, eventName: "api-calls", eventData: "1", creationDateTime: future },
    ]);
    t.is(dated.status, 400);
    const laterVersion = await sendUsage(baseUrl, session, [
      { transactionId: 11, eventName: "api-calls", eventData: "1", apiVersion: 2 },
    ]);
    t.is(laterVersion.status, 400);
    t.is(laterVersion.body.errors[0].field, "events[0].apiVersion");
    t.is(await consumptionSeen(t, baseUrl, session, "api-calls"), 0.000001);
  });

  test(`${kind}: items in any accepted JSON form count; items of the wrong type are named, and nothing is stored`, async (t) => {
    const { baseUrl } = t.context.servers[kind];
    const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
    const session = await meteredSession(baseUrl, entitlement);
    const mixed = await sendUsage(baseUrl, session, [
      { transactionId: 1, eventName: "api-calls", eventData: "1" },
      { transaction_id: " 2", event_name: "api-calls", event_data: "2", note: "an unknown field is ignored" },
      { transactionId: "3", eventName: "api-calls", eventData: "4", apiVersion: "1", creationDateTime: null },
    ]);
    t.deepEqual(mixed.body, { acceptedCount: 3, duplicateCount: 0 }, JSON.stringify(mixed.body));
    const wrongTypes = await sendUsage(baseUrl, session, [
      { transactionId: 4, eventName: "api-calls", eventData: "8" },
      { transactionId: "four", eventName: "api-calls", eventData: "8" },
      { transactionId: 6, eventName: "api-calls", eventData: 8 },
    ]);
    t.is(wrongTypes.status, 400, JSON.stringify(wrongTypes.body));
    t.deepEqual(
      wrongTypes.body.errors.map((error: { field: string; message: string }) => [error.field, error.message]),
      [
        ["events[1].transactionId", "must be a whole number"],
        ["events[2].eventData", "must be a string"],
      ],
    );
    t.is(await consumptionSeen(t, baseUrl, session, "api-calls"), 7.000001);
  });

  test(`${kind}: usage that would enter a Block tier refuses the whole batch, naming the metric`, async (t) => {
    const { baseUrl } = t.context.servers[kind];
    const entitlement = await meteredEntitlement(baseUrl, [API_CALLS]);
    const session = await meteredSession(baseUrl, entitlement);
    t.is((await sendUsage(baseUrl, session, usageItems("api-calls", [110]))).status, 200);
    const blocked = await sendUsage(baseUrl, session, usageItems("api-calls", [5, 6], 2));
    t.is(blocked.status, 403);
    t.is(blocked.body.type, "urn:provision:problem:usage-blocked");
    t.regex(blocked.body.detail, /api-calls/);
    t.is((await sendUsage(baseUrl, session, usageItems("api-calls", [10], 2))).status, 200);
    t.is(await consumptionSeen(t, baseUrl, session, "api-calls"), 120);
    const refused = await preallocate(baseUrl, session, "api-calls", 1);
    t.like(refused.body, { granted: false, currentValue: 120, tier: "Overage", quotaUsageLevel: 2 });
  });

  test(`${kind}: 64 racing pre-allocations never pass the Block tier, and the total is exact`, async (t) => {
    const server = t.context.servers[kind];
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
    const sessions = await Promise.all(Array.from({ length: 4 }, () => meteredSession(server.baseUrl, entitlement)));
    const answers = await Promise.all(
      Array.from({ length: 64 }, (_, index) => preallocate(server.baseUrl, sessions[index % 4], "api-calls", 2.5)),
    );
    t.true(answers.every((answer) => answer.status === 200));
    const granted = answers.filter((answer) => answer.body.granted);
    t.is(granted.length, 48);
    t.deepEqual(
      granted.map((answer) => answer.body.currentValue).sort((a, b) => a - b),
      Array.from({ length: 48 }, (_, index) => (index + 1) * 2.5),
    );
    const assetId = await assetIdOf(server, entitlement.entitlementId, "api-calls");
    const [stored] = (await server.app.dataSource.query(
      "SELECT COUNT(*) AS n, SUM(amount) AS total FROM usage_records WHERE asset_id = ?",
      [assetId],
    )) as { n: unknown; total: unknown }[];
    t.deepEqual([Number(stored.n), Number(stored.total)], [48, 120_000_000]);
  });

  test(`${kind}: overage events go out once per crossing, with the previous and new severity`, async (t) => {
    const server = t.context.servers[kind];
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
    const session = await meteredSession(server.baseUrl, entitlement);
    await sendUsage(server.baseUrl, session, usageItems("api-calls", [50, 40]));
    await Promise.all(Array.from({ length: 20 }, () => preallocate(server.baseUrl, session, "api-calls", 1)));
    await sendUsage(server.baseUrl, session, usageItems("api-calls", [5], 3));
    const assetId = await assetIdOf(server, entitlement.entitlementId, "api-calls");
    const events = await usageEventsOf(server, entitlement.entitlementId, "api-calls");
    t.is(events.length, 1);
    t.like(events[0], {
      type: "MeteredUsage.OverageStatusChanged",
      data: { previousSeverity: 1, severity: 2, tier: "Overage", metricName: "api-calls", assetId },
    });
  });

  test(`${kind}: a credit balance is drawn down, refuses what is not left, and reports Low and Depleted once`, async (t) => {
    const server = t.context.servers[kind];
    const entitlement = await meteredEntitlement(server.baseUrl, [CREDITS]);
    const session = await meteredSession(server.baseUrl, entitlement);
    const first = await preallocate(server.baseUrl, session, "credits", 30);
    t.like(first.body, { granted: true, currentValue: 30, limit: 50, quotaUsageLevel: 1 });
    t.is((await sendUsage(server.baseUrl, session, usageItems("credits", [11]))).status, 200);
    const tooMuch = await sendUsage(server.baseUrl, session, usageItems("credits", [10], 2));
    t.is(tooMuch.status, 403);
    t.is(tooMuch.body.type, "urn:provision:problem:credits-exhausted");
    const refused = await preallocate(server.baseUrl, session, "credits", 9.5);
    t.like(refused.body, { granted: false, currentValue: 41, tier: "Low", quotaUsageLevel: 2 });
    const last = await preallocate(server.baseUrl, session, "credits", 9);
    t.like(last.body, { granted: true, currentValue: 50, quotaUsageLevel: 4, quotaUsagePolicy: 3 });
    const events = await usageEventsOf(server, entitlement.entitlementId, "credits");
    t.deepEqual(
      events.map((event) => [event.type, event.data.previousStatus, event.data.status, event.data.creditsLeft]),
      [
        ["CreditBalance.StatusChanged", 1, 2, 9],
        ["CreditBalance.StatusChanged", 2, 3, 0],
      ],
    );
  });
}
