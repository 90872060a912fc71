import type { BalanceUsage, MeteredUsage } from "../../gen/provision/v1/catalog_pb.js";
import type { Entitlement } from "../../gen/provision/v1/entitlement_pb.js";
import type { AssetUsage } from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially } from "../platform/database.js";
import { assetUsageOf } from "./asset-usage-report.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** Normal, as OverageSeverity numbers it: the status of an asset nothing was ever reported for. */
const NORMAL = 1;

interface LiveAsset {
  usage: AssetUsage;
  reportedStatus: number;
}

/**
 * Fills the entitlement's own monitored assets with where they stand now, from committed records (as
 * GetEntitlementUsage reads them): a balance's `creditsUsed`, `totalCredits`, `cumulativeCreditsUsed`,
 * `lastDeposit`, `lastAutoBalanceDate` and `overageSeverityStatus` (its CreditBalanceStatus); metered usage's
 * `lastReportedOverageSeverityStatus` (the status its last overage event reported; Normal before any).
 */
export async function fillLiveAssetUsage(deps: UsageDependencies, entitlement: Entitlement): Promise<void> {
  const assets = entitlement.products
    .flatMap((product) => product.monitoredAssets)
    .filter((asset) => asset.entitlementId === entitlement.id);
  if (assets.length === 0) return;
  const live = await liveAssets(deps, entitlement.id);
  for (const asset of assets) {
    const state = live.get(asset.id);
    if (!state) continue;
    if (asset.balanceUsage) fillBalance(asset.balanceUsage, state.usage);
    if (asset.meteredUsage) fillMetered(asset.meteredUsage, state.reportedStatus);
  }
}

async function liveAssets(deps: UsageDependencies, entitlementId: string): Promise<Map<string, LiveAsset>> {
  const usage = await deps.directory.of(entitlementId);
  if (!usage) return new Map();
  const now = deps.clock.now();
  const manager = deps.dataSource.manager;
  const states = await readSerially(deps.dataSource, () =>
    Promise.all(
      usage.assets.map(async (asset) => ({
        assetId: asset.id,
        usage: await assetUsageOf(deps, manager, asset, now),
        reportedStatus: (await deps.store.reportedStatus(manager, asset.id)) ?? NORMAL,
      })),
    ),
  );
  return new Map(states.map((state) => [state.assetId, state]));
}

function fillBalance(balance: BalanceUsage, usage: AssetUsage): void {
  balance.creditsUsed = usage.consumption;
  balance.totalCredits = usage.limit;
  balance.cumulativeCreditsUsed = usage.cumulativeCreditsUsed;
  balance.lastDeposit = usage.lastDeposit;
  balance.lastAutoBalanceDate = usage.lastAutoBalanceDate;
  balance.overageSeverityStatus = usage.balanceStatus;
}

function fillMetered(metered: MeteredUsage, reportedStatus: number): void {
  metered.lastReportedOverageSeverityStatus = reportedStatus;
}
