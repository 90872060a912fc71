import type { BalanceUsage } from "../../gen/provision/v1/catalog_pb.js";
import type { Entitlement } from "../../gen/provision/v1/entitlement_pb.js";
import type { AssetUsage } from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially } from "../platform/database.js";
import { assetUsageOf } from "./asset-usage-report.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** Normal, as OverageSeverity numbers it: the status of an asset nothing was ever reported for. */
const NORMAL = 1;

/**
 * Fills the entitlement's own monitored assets with where they stand now, from committed records (as
 * GetEntitlementUsage reads them): a balance's `creditsUsed`, `totalCredits`, `cumulativeCreditsUsed`,
 * `lastDeposit`, `lastAutoBalanceDate` and `overageSeverityStatus` (its CreditBalanceStatus); metered usage's
 * `lastReportedOverageSeverityStatus` (the status its last overage event reported; Normal before any).
 */
export async function fillLiveAssetUsage(deps: UsageDependencies, entitlement: Entitlement): Promise<void> {
  const shown = new Map(
    entitlement.products
      .flatMap((product) => product.monitoredAssets)
      .filter((asset) => asset.entitlementId === entitlement.id)
      .map((asset) => [asset.id, asset]),
  );
  if (shown.size === 0) return;
  const usage = await deps.directory.of(entitlement.id);
  if (!usage) return;
  const now = deps.clock.now();
  const manager = deps.dataSource.manager;
  await readSerially(deps.dataSource, () =>
    Promise.all(
      usage.assets.map(async (asset) => {
        const copy = shown.get(asset.id);
        if (copy?.balanceUsage && asset.balance) {
          fillBalance(copy.balanceUsage, await assetUsageOf(deps, manager, asset, now));
        }
        if (copy?.meteredUsage) {
          copy.meteredUsage.lastReportedOverageSeverityStatus =
            (await deps.store.reportedStatus(manager, asset.id)) ?? NORMAL;
        }
      }),
    ),
  );
}

function fillBalance(balance: BalanceUsage, usage: AssetUsage): void {
  balance.creditsUsed = usage.consumption;
  balance.totalCredits = usage.limit ?? 0;
  balance.cumulativeCreditsUsed = usage.cumulativeCreditsUsed;
  balance.lastDeposit = usage.lastDeposit;
  balance.lastAutoBalanceDate = usage.lastAutoBalanceDate;
  balance.overageSeverityStatus = usage.balanceStatus;
}
