import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import {
  AccumulationMethodSchema,
  CreditBalanceStatusSchema,
  type Feature,
  MetricTypeSchema,
  type MonitoredAsset,
  OverageSeveritySchema,
  type Product,
  ProductStatusSchema,
  QuotaUsagePolicySchema,
  type UsageTier,
} from "../../gen/provision/v1/catalog_pb.js";
import type { Violations } from "../platform/validation.js";
import { parseConsumptionPeriod } from "../usage/consumption-periods.js";
import { nextFireAfter } from "../usage/cron-schedule.js";

export const LIMITS = {
  code: 128,
  version: 64,
  name: 255,
  externalId: 255,
  featurePath: 512,
  metricName: 128,
  shortText: 64,
  category: 128,
  /** Characters of a product's propertyValues as stored JSON, after a PUT merged them. */
  propertyValues: 65_536,
} as const;

/** Features a product holds, soft-deleted ones included (also the cap of a request's `features`). */
export const MAX_FEATURES_PER_PRODUCT = 1000;
/** Monitored assets a product holds. */
export const MAX_ASSETS_PER_PRODUCT = 100;
/** Elements of every repeated and map field inside the products of one import, together. */
export const MAX_IMPORT_NESTED_ITEMS = 10_000;

/** The instants a date column holds on every database: years 1000 to 9999. */
const EARLIEST_DATE_SECONDS = BigInt(Date.UTC(1000, 0, 1) / 1000);
const LATEST_DATE_SECONDS = BigInt(Date.UTC(10000, 0, 1) / 1000) - 1n;

export function checkProductFields(
  violations: Violations,
  prefix: string,
  fields: {
    productCode?: string;
    productVersion?: string;
    name?: string;
    externalId?: string;
    expirationDate?: Timestamp;
  },
): void {
  violations
    .maxLength(`${prefix}productCode`, fields.productCode, LIMITS.code)
    .maxLength(`${prefix}productVersion`, fields.productVersion, LIMITS.version)
    .maxLength(`${prefix}name`, fields.name, LIMITS.name)
    .maxLength(`${prefix}externalId`, fields.externalId, LIMITS.externalId);
  checkStoredDate(violations, `${prefix}expirationDate`, fields.expirationDate);
}

/** A date stored in a datetime column: a valid timestamp between the years 1000 and 9999. */
export function checkStoredDate(violations: Violations, field: string, timestamp: Timestamp | undefined): void {
  if (!timestamp) return;
  const { seconds, nanos } = timestamp;
  if (seconds < EARLIEST_DATE_SECONDS || seconds > LATEST_DATE_SECONDS || nanos < 0 || nanos > 999_999_999) {
    violations.add(field, "must be a valid date-time between the years 1000 and 9999");
  }
}

export function checkPropertyValuesSize(violations: Violations, field: string, stored: string | null): void {
  if (stored && stored.length > LIMITS.propertyValues) {
    violations.add(field, `must come to at most ${LIMITS.propertyValues} characters of JSON (${stored.length} now)`);
  }
}

export function checkStatus(violations: Violations, field: string, status: number): void {
  violations.enumValue(field, status, ProductStatusSchema);
}

export function checkFeature(
  violations: Violations,
  prefix: string,
  feature: Partial<
    Pick<
      Feature,
      | "featureCode"
      | "featurePath"
      | "moduleName"
      | "name"
      | "version"
      | "units"
      | "type"
      | "usageMetric"
      | "meteredAssetId"
    >
  >,
): void {
  violations
    .maxLength(`${prefix}featureCode`, feature.featureCode, LIMITS.code)
    .maxLength(`${prefix}featurePath`, feature.featurePath, LIMITS.featurePath)
    .maxLength(`${prefix}moduleName`, feature.moduleName, LIMITS.name)
    .maxLength(`${prefix}name`, feature.name, LIMITS.name)
    .maxLength(`${prefix}version`, feature.version, LIMITS.version)
    .maxLength(`${prefix}units`, feature.units, LIMITS.shortText)
    .maxLength(`${prefix}type`, feature.type, LIMITS.shortText)
    .maxLength(`${prefix}usageMetric`, feature.usageMetric, LIMITS.name)
    .uuid(`${prefix}meteredAssetId`, feature.meteredAssetId);
}

export function checkMonitoredAsset(violations: Violations, prefix: string, asset: MonitoredAsset): void {
  violations
    .required(`${prefix}metricName`, asset.metricName)
    .maxLength(`${prefix}metricName`, asset.metricName, LIMITS.metricName)
    .maxLength(`${prefix}name`, asset.name, LIMITS.name)
    .maxLength(`${prefix}unit`, asset.unit, LIMITS.shortText)
    .maxLength(`${prefix}category`, asset.category, LIMITS.category)
    .maxLength(`${prefix}numberFormat`, asset.numberFormat, LIMITS.shortText)
    .uuid(`${prefix}id`, asset.id)
    .uuid(`${prefix}entitlementId`, asset.entitlementId)
    .uuid(`${prefix}meteredUsageId`, asset.meteredUsageId)
    .uuid(`${prefix}balanceUsageId`, asset.balanceUsageId)
    .enumValue(`${prefix}metricType`, asset.metricType, MetricTypeSchema);
  checkDuration(violations, `${prefix}allowedBackDatingTolerance`, asset.allowedBackDatingTolerance);
  const tolerance = asset.allowedBackDatingTolerance;
  if (tolerance && (tolerance.seconds < 0n || tolerance.nanos < 0)) {
    violations.add(`${prefix}allowedBackDatingTolerance`, "must not be negative");
  }
  const metered = asset.meteredUsage;
  if (metered) {
    checkTimestamp(violations, `${prefix}meteredUsage.suspendUntilTimeStamp`, metered.suspendUntilTimeStamp);
    violations
      .uuid(`${prefix}meteredUsage.id`, metered.id)
      .enumValue(
        `${prefix}meteredUsage.lastReportedOverageSeverityStatus`,
        metered.lastReportedOverageSeverityStatus,
        OverageSeveritySchema,
      )
      .enumValue(`${prefix}meteredUsage.accumulationMethod`, metered.accumulationMethod, AccumulationMethodSchema);
    const period = parseConsumptionPeriod(metered.consumptionPeriod);
    if ("problem" in period) violations.add(`${prefix}meteredUsage.consumptionPeriod`, period.problem);
    for (const [index, tier] of metered.usageTiers.entries()) {
      const field = `${prefix}meteredUsage.usageTiers[${index}]`;
      violations
        .enumValue(`${field}.quotaUsageLevel`, tier.quotaUsageLevel, OverageSeveritySchema)
        .enumValue(`${field}.quotaUsagePolicy`, tier.quotaUsagePolicy, QuotaUsagePolicySchema);
      checkAmounts(violations, `${field}.`, {
        startUsage: tier.startUsage,
        endUsage: tier.endUsage,
        baseCredits: tier.baseCredits,
        creditsPerUnitOfConsumption: tier.creditsPerUnitOfConsumption,
      });
      violations.maxLength(`${field}.name`, tier.name, LIMITS.name);
      if (tier.endUsage !== 0 && tier.endUsage <= tier.startUsage) {
        violations.add(`${field}.endUsage`, "must be more than startUsage (0 means unbounded)");
      }
    }
    checkTierBands(violations, `${prefix}meteredUsage.usageTiers`, metered.usageTiers);
  }
  const balance = asset.balanceUsage;
  if (balance) {
    for (const name of ["lastDeposit", "suspendUntilTimeStamp", "lastAutoBalanceDate"] as const) {
      checkTimestamp(violations, `${prefix}balanceUsage.${name}`, balance[name]);
    }
    violations
      .uuid(`${prefix}balanceUsage.id`, balance.id)
      .enumValue(
        `${prefix}balanceUsage.overageSeverityStatus`,
        balance.overageSeverityStatus,
        CreditBalanceStatusSchema,
      );
    const schedule = balance.autoBalanceCronSchedule.trim();
    if (schedule !== "" && nextFireAfter(schedule, new Date()) === null) {
      violations.add(
        `${prefix}balanceUsage.autoBalanceCronSchedule`,
        "must be a cron expression (5 fields, or 6 with seconds, in UTC) that fires, such as 0 0 1 * *",
      );
    }
    checkAmounts(violations, `${prefix}balanceUsage.`, {
      totalCredits: balance.totalCredits,
      initialCreditAmount: balance.initialCreditAmount,
      autoBalanceCreditAmount: balance.autoBalanceCreditAmount,
      maxAutoBalanceCreditTransferAmount: balance.maxAutoBalanceCreditTransferAmount,
    });
    for (const [index, quota] of balance.usageQuota.entries()) {
      const field = `${prefix}balanceUsage.usageQuota[${index}]`;
      checkAmounts(violations, `${field}.`, { endUsage: quota.endUsage });
      if (quota.endUsage > 100) violations.add(`${field}.endUsage`, "must be a percentage of the credits, 0-100");
      violations.maxLength(`${field}.name`, quota.name, LIMITS.name);
      violations.enumValue(
        `${prefix}balanceUsage.usageQuota[${index}].quotaUsageLevel`,
        quota.quotaUsageLevel,
        CreditBalanceStatusSchema,
      );
    }
  }
  if (asset.metricType === 1 && !metered)
    violations.add(`${prefix}meteredUsage`, "is required when metricType is 1 (Metered)");
  if (asset.metricType === 2 && !balance)
    violations.add(`${prefix}balanceUsage`, "is required when metricType is 2 (Balance)");
}

/**
 * Tiers are bands, one after another in order of `startUsage`: each starts where the one below it ends, only the
 * highest may be unbounded, and no two share a name. (Overlaps or gaps would leave consumption in a tier
 * past its end.)
 */
function checkTierBands(violations: Violations, field: string, tiers: readonly UsageTier[]): void {
  const byStart = tiers.map((tier, index) => ({ tier, index })).sort((a, b) => a.tier.startUsage - b.tier.startUsage);
  for (let rank = 1; rank < byStart.length; rank++) {
    const below = byStart[rank - 1];
    const { tier, index } = byStart[rank];
    if (below.tier.endUsage === 0) {
      violations.add(`${field}[${below.index}].endUsage`, "must be set: only the highest tier may be unbounded");
    } else if (tier.startUsage !== below.tier.endUsage) {
      violations.add(
        `${field}[${index}].startUsage`,
        `must be ${below.tier.endUsage}, where the tier below it (usageTiers[${below.index}]) ends`,
      );
    }
  }
  const seen = new Set<string>();
  for (const [index, tier] of tiers.entries()) {
    if (tier.name !== "" && seen.has(tier.name)) {
      violations.add(`${field}[${index}].name`, "must differ from the other tiers' names");
    }
    seen.add(tier.name);
  }
}

/** Amounts of a definition (bounds, credits, percentages): finite and 0 or more. */
function checkAmounts(violations: Violations, prefix: string, amounts: Record<string, number>): void {
  for (const [name, value] of Object.entries(amounts)) {
    if (!(Number.isFinite(value) && value >= 0))
      violations.add(`${prefix}${name}`, "must be a finite number, 0 or more");
  }
}

/** Refuses an import whose products hold more than MAX_IMPORT_NESTED_ITEMS nested elements together. */
export function checkImportSize(violations: Violations, products: Product[]): void {
  let items = 0;
  for (const product of products) {
    items += product.features.length + product.monitoredAssets.length;
    for (const value of Object.values(product.propertyValues)) items += 1 + value.metadata.length;
    for (const asset of product.monitoredAssets) {
      items += (asset.meteredUsage?.usageTiers.length ?? 0) + (asset.balanceUsage?.usageQuota.length ?? 0);
    }
  }
  if (items > MAX_IMPORT_NESTED_ITEMS) {
    violations.add(
      "products",
      `hold ${items} nested items (features, monitored assets, usage tiers and quotas, property values and their metadata); at most ${MAX_IMPORT_NESTED_ITEMS} are allowed per import`,
    );
  }
}

/** google.protobuf.Duration's valid range: about ±10,000 years, nanos with the sign of seconds. */
const MAX_DURATION_SECONDS = 315_576_000_000n;
/** google.protobuf.Timestamp's valid range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z. */
const MIN_TIMESTAMP_SECONDS = -62_135_596_800n;
const MAX_TIMESTAMP_SECONDS = 253_402_300_799n;

export function checkDuration(violations: Violations, field: string, duration: Duration | undefined): void {
  if (!duration) return;
  const { seconds, nanos } = duration;
  const inRange = seconds >= -MAX_DURATION_SECONDS && seconds <= MAX_DURATION_SECONDS && Math.abs(nanos) <= 999_999_999;
  const signAgrees = seconds === 0n || nanos === 0 || seconds > 0n === nanos > 0;
  if (!inRange || !signAgrees) {
    violations.add(
      field,
      "must be a valid duration: at most 315576000000 seconds either way, nanos with the sign of seconds",
    );
  }
}

export function checkTimestamp(violations: Violations, field: string, timestamp: Timestamp | undefined): void {
  if (!timestamp) return;
  const { seconds, nanos } = timestamp;
  if (seconds < MIN_TIMESTAMP_SECONDS || seconds > MAX_TIMESTAMP_SECONDS || nanos < 0 || nanos > 999_999_999) {
    violations.add(field, "must be a valid timestamp between 0001-01-01 and 9999-12-31, nanos from 0 to 999999999");
  }
}
