import {
  CreditBalanceStatus,
  OverageSeverity,
  QuotaUsagePolicy,
  type UsageQuota,
  type UsageTier,
} from "../../gen/provision/v1/catalog_pb.js";
import { definitionMicro } from "./usage-amounts.js";

/** A usage tier with its bounds in micro-units. */
export interface TierRule {
  name: string;
  startMicro: number;
  /** Null: no upper bound. */
  endMicro: number | null;
  severity: OverageSeverity;
  policy: QuotaUsagePolicy;
}

/** A balance quota: reaching `percentUsed` of the credits puts the balance at `status`. */
export interface QuotaRule {
  name: string;
  percentUsed: number;
  status: CreditBalanceStatus;
}

/** The tiers ordered by start; a tier's level 0 (unset) is Normal and its policy 0 (unset) is Allow. */
export function tierRulesOf(tiers: readonly UsageTier[]): TierRule[] {
  return tiers
    .map((tier) => ({
      name: tier.name,
      startMicro: definitionMicro(tier.startUsage),
      endMicro: tier.endUsage > tier.startUsage ? definitionMicro(tier.endUsage) : null,
      severity: tier.quotaUsageLevel || OverageSeverity.NORMAL,
      policy: tier.quotaUsagePolicy || QuotaUsagePolicy.ALLOW,
    }))
    .sort((a, b) => a.startMicro - b.startMicro);
}

/**
 * The tier a consumption falls in: a tier covers consumption above its start up to and including its end, so
 * it is the tier with the greatest start below the value. Consumption at or below the first tier's start is in
 * none (Normal), unless that start is 0: nothing consumed yet is in a first tier starting at 0.
 */
export function tierAt(tiers: readonly TierRule[], valueMicro: number): TierRule | undefined {
  let found = tiers[0]?.startMicro === 0 ? tiers[0] : undefined;
  for (const tier of tiers) {
    if (tier.startMicro < valueMicro) found = tier;
    else break;
  }
  return found;
}

/** Consumption above this is refused: the start of the first Block tier; undefined without one. */
export function blockCapOf(tiers: readonly TierRule[]): number | undefined {
  return tiers.find((tier) => tier.policy === QuotaUsagePolicy.BLOCK)?.startMicro;
}

export function severityAt(tiers: readonly TierRule[], valueMicro: number): OverageSeverity {
  return tierAt(tiers, valueMicro)?.severity ?? OverageSeverity.NORMAL;
}

export function quotaRulesOf(quotas: readonly UsageQuota[]): QuotaRule[] {
  return quotas
    .map((quota) => ({
      name: quota.name,
      percentUsed: quota.endUsage,
      status: quota.quotaUsageLevel || CreditBalanceStatus.NORMAL,
    }))
    .sort((a, b) => a.percentUsed - b.percentUsed);
}

/**
 * A balance's status: Depleted once every credit is used; otherwise the quota with the highest share of the
 * credits used that has been reached (Normal when none). Unlimited credits are always Normal.
 */
export function balanceStatusOf(
  quotas: readonly QuotaRule[],
  usedMicro: number,
  totalMicro: number | null,
): { status: CreditBalanceStatus; quota: string } {
  if (totalMicro === null) return { status: CreditBalanceStatus.NORMAL, quota: "" };
  if (usedMicro >= totalMicro) {
    const depleted = quotas.find((quota) => quota.status === CreditBalanceStatus.DEPLETED);
    return { status: CreditBalanceStatus.DEPLETED, quota: depleted?.name ?? "Depleted" };
  }
  const percent = totalMicro === 0 ? 100 : (usedMicro * 100) / totalMicro;
  let reached: QuotaRule | undefined;
  for (const quota of quotas) if (quota.percentUsed <= percent) reached = quota;
  return reached ? { status: reached.status, quota: reached.name } : { status: CreditBalanceStatus.NORMAL, quota: "" };
}

/** A balance status as an overage severity: Normal -> Normal, Low -> Warning, Depleted -> OverUsage. */
export function severityOfBalance(status: CreditBalanceStatus): OverageSeverity {
  if (status === CreditBalanceStatus.DEPLETED) return OverageSeverity.OVER_USAGE;
  if (status === CreditBalanceStatus.LOW) return OverageSeverity.WARNING;
  return OverageSeverity.NORMAL;
}
