import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { EntityManager } from "typeorm";
import { CreditBalanceStatus, OverageSeverity, QuotaUsagePolicy } from "../../gen/provision/v1/catalog_pb.js";
import { type AssetUsage, AssetUsageSchema } from "../../gen/provision/v1/usage_admin_pb.js";
import { periodOf } from "./consumption-periods.js";
import { fromMicro } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import { balanceStatusOf, severityOfBalance, tierAt } from "./usage-tiers.js";

type AssetIdentity = Pick<AssetUsage, "assetId" | "productId" | "metricName" | "name" | "unit" | "metricType">;

/** Where an asset stands now, from what the database has recorded (committed usage only). */
export async function assetUsageOf(
  deps: UsageDependencies,
  manager: EntityManager,
  asset: UsageAsset,
  now: Date,
): Promise<AssetUsage> {
  const identity: AssetIdentity = {
    assetId: asset.id,
    productId: asset.productId,
    metricName: asset.metricName,
    name: asset.name,
    unit: asset.unit,
    metricType: asset.metricType,
  };
  if (asset.metered) {
    const { tiers, mode, blockCapMicro } = asset.metered;
    const period = periodOf(asset.metered.period, now);
    const value = await deps.store.recordedTotal(manager, asset.id, period.start, mode === "peak");
    const tier = tierAt(tiers, value);
    return create(AssetUsageSchema, {
      ...identity,
      periodStart: timestampFromDate(period.start),
      periodEnd: timestampFromDate(period.end),
      consumption: fromMicro(value),
      tier: tier?.name ?? "",
      severity: tier?.severity ?? OverageSeverity.NORMAL,
      quotaUsagePolicy: tier?.policy ?? QuotaUsagePolicy.ALLOW,
      limit: blockCapMicro === undefined ? undefined : fromMicro(blockCapMicro),
      accumulationMethod: mode === "peak" ? 1 : 0,
    });
  }
  if (asset.balance) return balanceUsageOf(deps, manager, asset, identity);
  return create(AssetUsageSchema, identity);
}

async function balanceUsageOf(
  deps: UsageDependencies,
  manager: EntityManager,
  asset: UsageAsset,
  identity: AssetIdentity,
): Promise<AssetUsage> {
  const rules = asset.balance as NonNullable<UsageAsset["balance"]>;
  const balance = await deps.balances.find(manager, asset.id);
  const start = balance?.periodStart;
  const total = rules.unlimited ? null : start ? await deps.store.periodCredits(manager, asset.id, start) : null;
  const credits = rules.unlimited ? null : (total ?? rules.initialCreditsMicro);
  const used = start ? await deps.store.recordedTotal(manager, asset.id, start, false) : 0;
  const cumulative = await deps.store.recordedTotal(manager, asset.id, null, false);
  const { status, quota } = balanceStatusOf(rules.quotas, used, credits);
  return create(AssetUsageSchema, {
    ...identity,
    periodStart: start ? timestampFromDate(start) : undefined,
    consumption: fromMicro(used),
    tier: quota,
    severity: severityOfBalance(status),
    quotaUsagePolicy: status === CreditBalanceStatus.DEPLETED ? QuotaUsagePolicy.BLOCK : QuotaUsagePolicy.ALLOW,
    limit: credits === null ? undefined : fromMicro(credits),
    balanceStatus: status,
    creditsLeft: credits === null ? 0 : fromMicro(Math.max(0, credits - used)),
    isUnlimitedCredits: credits === null,
    cumulativeCreditsUsed: fromMicro(cumulative),
    lastDeposit: balance?.lastDepositAt ? timestampFromDate(balance.lastDepositAt) : undefined,
    lastAutoBalanceDate: balance?.lastAutoBalanceAt ? timestampFromDate(balance.lastAutoBalanceAt) : undefined,
  });
}
