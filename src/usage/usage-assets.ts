import { fromJsonString } from "@bufbuild/protobuf";
import {
  AccumulationMethod,
  type BalanceUsage,
  BalanceUsageSchema,
  MeteredUsageSchema,
  MetricType,
} from "../../gen/provision/v1/catalog_pb.js";
import type { MonitoredAssetRow } from "../catalog/entities.js";
import type { MeterMode } from "../platform/usage-meters.js";
import { type ConsumptionPeriod, parseConsumptionPeriod } from "./consumption-periods.js";
import { definitionMicro } from "./usage-amounts.js";
import { blockCapOf, type QuotaRule, quotaRulesOf, type TierRule, tierRulesOf } from "./usage-tiers.js";

/** How far back a usage item may be dated when the asset does not say. */
export const DEFAULT_BACK_DATING_TOLERANCE_MS = 35 * 86_400_000;

export interface MeteredRules {
  tiers: TierRule[];
  period: ConsumptionPeriod;
  mode: MeterMode;
  /** Consumption above this is refused (the first Block tier's start); undefined: never refused. */
  blockCapMicro: number | undefined;
}

export interface BalanceRules {
  quotas: QuotaRule[];
  unlimited: boolean;
  /** Credits of a new balance: initialCreditAmount, or totalCredits when that is 0. */
  initialCreditsMicro: number;
  autoBalance: AutoBalanceRules | undefined;
}

export interface AutoBalanceRules {
  cron: string;
  creditAmountMicro: number;
  transferCurrentCredits: boolean;
  /** Undefined: everything left is carried over. */
  maxTransferMicro: number | undefined;
}

/** An entitlement's monitored asset as metering reads it. */
export interface UsageAsset {
  id: string;
  productId: string;
  entitlementId: string;
  metricName: string;
  name: string;
  unit: string;
  metricType: MetricType;
  backDatingToleranceMs: number;
  metered: MeteredRules | undefined;
  balance: BalanceRules | undefined;
}

export function usageAssetOf(row: MonitoredAssetRow): UsageAsset {
  return {
    id: row.id,
    productId: row.productId,
    entitlementId: row.entitlementId ?? "",
    metricName: row.metricName,
    name: row.name,
    unit: row.unit,
    metricType: row.metricType,
    backDatingToleranceMs: toleranceMs(row.allowedBackDatingTolerance),
    metered: row.metricType === MetricType.METERED ? meteredRules(row.meteredUsage) : undefined,
    balance: row.metricType === MetricType.BALANCE ? balanceRules(row.balanceUsage) : undefined,
  };
}

function meteredRules(text: string | null): MeteredRules {
  const usage = fromJsonString(MeteredUsageSchema, text ?? "{}", { ignoreUnknownFields: true });
  const period = parseConsumptionPeriod(usage.consumptionPeriod);
  const tiers = tierRulesOf(usage.usageTiers);
  return {
    tiers,
    // Checked when the asset was written; a period stored before that check counts by calendar month.
    period: "problem" in period ? (parseConsumptionPeriod("") as ConsumptionPeriod) : period,
    mode: usage.accumulationMethod === AccumulationMethod.PEAK ? "peak" : "sum",
    blockCapMicro: blockCapOf(tiers),
  };
}

function balanceRules(text: string | null): BalanceRules {
  const usage = fromJsonString(BalanceUsageSchema, text ?? "{}", { ignoreUnknownFields: true });
  return {
    quotas: quotaRulesOf(usage.usageQuota),
    unlimited: usage.isUnlimitedCredits,
    initialCreditsMicro: definitionMicro(usage.initialCreditAmount || usage.totalCredits),
    autoBalance: autoBalanceRules(usage),
  };
}

function autoBalanceRules(usage: BalanceUsage): AutoBalanceRules | undefined {
  if (usage.autoBalanceCronSchedule.trim() === "") return undefined;
  return {
    cron: usage.autoBalanceCronSchedule.trim(),
    creditAmountMicro: definitionMicro(usage.autoBalanceCreditAmount),
    transferCurrentCredits: usage.shouldAutoBalanceTransferCurrentCredits,
    maxTransferMicro:
      usage.maxAutoBalanceCreditTransferAmount > 0
        ? definitionMicro(usage.maxAutoBalanceCreditTransferAmount)
        : undefined,
  };
}

/** A stored protobuf JSON duration (`"3600s"`, `"1.5s"`) in ms; the default when unset. */
function toleranceMs(stored: string | null): number {
  const match = stored ? /^(\d+)(?:\.(\d{1,9}))?s$/.exec(stored) : null;
  if (!match) return DEFAULT_BACK_DATING_TOLERANCE_MS;
  return Number(match[1]) * 1000 + Math.floor(Number(`0.${match[2] ?? "0"}`) * 1000);
}
