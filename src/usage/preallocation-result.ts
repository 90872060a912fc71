import { create } from "@bufbuild/protobuf";
import { CreditBalanceStatus, OverageSeverity, QuotaUsagePolicy } from "../../gen/provision/v1/catalog_pb.js";
import { type PreallocationResult, PreallocationResultSchema } from "../../gen/provision/v1/usage_pb.js";
import { fromMicro } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import { balanceStatusOf, severityOfBalance, tierAt } from "./usage-tiers.js";

/** Where a metric stands: `valueMicro` is the period's consumption (a balance: credits used), `limitMicro` a balance's credits. */
export function preallocationResultOf(
  asset: UsageAsset,
  valueMicro: number,
  limitMicro: number | null,
  granted: boolean,
): PreallocationResult {
  if (asset.balance) {
    const total = asset.balance.unlimited ? null : limitMicro;
    const { status, quota } = balanceStatusOf(asset.balance.quotas, valueMicro, total);
    return create(PreallocationResultSchema, {
      tier: quota,
      currentValue: fromMicro(valueMicro),
      start: 0,
      limit: total === null ? 0 : fromMicro(total),
      usagePercentage: percentOf(valueMicro, total),
      quotaUsageLevel: severityOfBalance(status),
      quotaUsagePolicy: status === CreditBalanceStatus.DEPLETED ? QuotaUsagePolicy.BLOCK : QuotaUsagePolicy.ALLOW,
      granted,
    });
  }
  const tier = asset.metered ? tierAt(asset.metered.tiers, valueMicro) : undefined;
  const end = tier?.endMicro ?? null;
  return create(PreallocationResultSchema, {
    tier: tier?.name ?? "",
    currentValue: fromMicro(valueMicro),
    start: tier ? fromMicro(tier.startMicro) : 0,
    limit: end === null ? 0 : fromMicro(end),
    usagePercentage: percentOf(valueMicro, end),
    quotaUsageLevel: tier?.severity ?? OverageSeverity.NORMAL,
    quotaUsagePolicy: tier?.policy ?? QuotaUsagePolicy.ALLOW,
    granted,
  });
}

function percentOf(valueMicro: number, limitMicro: number | null): number {
  return limitMicro ? (valueMicro * 100) / limitMicro : 0;
}
