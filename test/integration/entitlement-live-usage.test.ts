import anyTest, { type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import { ENTITLEMENTS } from "../support/licensing.js";
import {
  API_CALLS,
  CREDITS,
  creditsPath,
  type MeteredEntitlement,
  meteredEntitlement,
  meteredSession,
  sendUsage,
  usageItems,
} from "../support/metering.js";
import { rest } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  t.context = await startOnBothDatabases();
});

test.after.always(async (t) => {
  await t.context.close?.();
});

interface AssetView {
  metricName: string;
  meteredUsage?: { lastReportedOverageSeverityStatus: number };
  balanceUsage?: {
    creditsUsed: number;
    totalCredits: number;
    cumulativeCreditsUsed: number;
    overageSeverityStatus: number;
    lastDeposit: string | null;
  };
}

/** The entitlement's monitored assets by metric, as GetEntitlement answers them to `authorization`. */
async function assetsOf(
  server: TestServer,
  entitlement: MeteredEntitlement,
  authorization = server.adminAuthorization,
) {
  const answer = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlement.entitlementId}`, undefined, {
    authorization,
  });
  if (answer.status !== 200) throw new Error(`GetEntitlement: ${JSON.stringify(answer.body)}`);
  const assets = (answer.body.products as { monitoredAssets: AssetView[] }[]).flatMap((p) => p.monitoredAssets);
  return Object.fromEntries(assets.map((asset) => [asset.metricName, asset]));
}

for (const name of ["MySQL", "SQLite"] as const) {
  test(`${name}: GetEntitlement shows each asset's live usage, reported status and deposits`, async (t) => {
    const server = t.context.servers[name];
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS, CREDITS]);

    const fresh = await assetsOf(server, entitlement);
    t.is(fresh["api-calls"].meteredUsage?.lastReportedOverageSeverityStatus, 1, "Normal before any usage");
    t.like(fresh.credits.balanceUsage, {
      creditsUsed: 0,
      totalCredits: 50,
      cumulativeCreditsUsed: 0,
      overageSeverityStatus: 1,
      lastDeposit: null,
    });

    const session = await meteredSession(server.baseUrl, entitlement);
    const sent = await sendUsage(server.baseUrl, session, [
      ...usageItems("api-calls", [60, 45]),
      ...usageItems("credits", [41], 3),
    ]);
    t.is(sent.status, 200, JSON.stringify(sent.body));
    const used = await assetsOf(server, entitlement);
    t.is(used["api-calls"].meteredUsage?.lastReportedOverageSeverityStatus, 2, "105 calls entered the Warning tier");
    t.like(used.credits.balanceUsage, {
      creditsUsed: 41,
      totalCredits: 50,
      cumulativeCreditsUsed: 41,
      overageSeverityStatus: 2,
    });

    const before = Date.now();
    const topUp = await rest(server.baseUrl, "POST", creditsPath(entitlement.entitlementId, "credits"), {
      amount: 25,
    });
    t.is(topUp.status, 200, JSON.stringify(topUp.body));
    const toppedUp = (await assetsOf(server, entitlement)).credits.balanceUsage;
    t.like(toppedUp, { creditsUsed: 41, totalCredits: 75, cumulativeCreditsUsed: 41, overageSeverityStatus: 1 });
    const deposit = Date.parse(toppedUp?.lastDeposit ?? "");
    t.true(deposit >= before - 1000 && deposit <= Date.now() + 1000, `lastDeposit ${toppedUp?.lastDeposit}`);

    const renamed = await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlement.entitlementId}`, {
      name: "Renamed",
    });
    t.is(renamed.status, 200, JSON.stringify(renamed.body));
    const answered = (renamed.body.products as { monitoredAssets: AssetView[] }[])
      .flatMap((product) => product.monitoredAssets)
      .find((asset) => asset.metricName === "credits");
    t.like(answered?.balanceUsage, { creditsUsed: 41, totalCredits: 75 }, "a change's answer shows them too");
  });

  test(`${name}: without usage:read, GetEntitlement shows the assets' definitions`, async (t) => {
    const server = t.context.servers[name];
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS, CREDITS]);
    const session = await meteredSession(server.baseUrl, entitlement);
    await sendUsage(server.baseUrl, session, [...usageItems("api-calls", [110]), ...usageItems("credits", [45], 2)]);
    const readOnly = await accessToken(
      server.baseUrl,
      server.admin.clientId,
      server.admin.clientSecret,
      "entitlements:read",
    );
    const narrow = await assetsOf(server, entitlement, `Bearer ${readOnly}`);
    t.is(narrow.credits.balanceUsage?.creditsUsed, 0);
    t.is(narrow.credits.balanceUsage?.overageSeverityStatus, 0);
    t.is(narrow["api-calls"].meteredUsage?.lastReportedOverageSeverityStatus, 0);
    const live = await assetsOf(server, entitlement);
    t.is(live.credits.balanceUsage?.creditsUsed, 45);
    t.is(live.credits.balanceUsage?.overageSeverityStatus, 2);
    t.is(live["api-calls"].meteredUsage?.lastReportedOverageSeverityStatus, 2);
  });
}
