import { create, fromJsonString, type JsonValue, toJsonString } from "@bufbuild/protobuf";
import { type Duration, DurationSchema, type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type BalanceUsage,
  BalanceUsageSchema,
  type Feature,
  FeatureSchema,
  type MeteredUsage,
  MeteredUsageSchema,
  type MonitoredAsset,
  MonitoredAssetSchema,
  type Product,
  type ProductInformation,
  ProductInformationSchema,
  ProductSchema,
  type PropertyValue,
  PropertyValueSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import type { FeatureRow, MonitoredAssetRow, ProductRow } from "./entities.js";

export function toProduct(row: ProductRow, features: FeatureRow[], assets: MonitoredAssetRow[]): Product {
  return create(ProductSchema, {
    id: row.id,
    status: row.status,
    providerId: row.providerId,
    name: row.name,
    description: row.description ?? "",
    productCode: row.productCode,
    productVersion: row.productVersion,
    expirationDate: row.expirationDate ? timestampFromDate(row.expirationDate) : undefined,
    externalId: row.externalId,
    features: features.filter((feature) => !feature.isDeleted).map(toFeature),
    monitoredAssets: assets.map(toMonitoredAsset),
    productInformation: row.productInformation
      ? fromJsonString(ProductInformationSchema, row.productInformation)
      : undefined,
    propertyValues: parsePropertyValues(row.propertyValues),
    isDeleted: row.isDeleted,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
    revisionNumber: row.revisionNumber,
    isLocked: row.isLocked,
    productMetaData: row.productMetaData ?? "",
    productLicenseData: row.productLicenseData ?? "",
  });
}

export function toFeature(row: FeatureRow): Feature {
  return create(FeatureSchema, {
    id: row.id,
    featureCode: row.featureCode ?? "",
    featurePath: row.featurePath,
    moduleName: row.moduleName,
    name: row.name,
    description: row.description ?? "",
    value: row.value ?? "",
    version: row.version,
    isEnabled: row.isEnabled,
    isAvailableDuringTrialPeriod: row.isAvailableDuringTrialPeriod,
    isAvailableDuringGracePeriod: row.isAvailableDuringGracePeriod,
    canModifyValueOnEntitlement: row.canModifyValueOnEntitlement,
    isDeleted: row.isDeleted,
    creationTimeStamp: timestampFromDate(row.createdAt),
    lastUpdateTimeStamp: timestampFromDate(row.updatedAt),
    revisionNumber: row.revisionNumber,
    usageMetric: row.usageMetric,
    units: row.units,
    type: row.type,
    canModifyEnabledOnEntitlement: row.canModifyEnabledOnEntitlement,
    meteredAssetId: row.meteredAssetId ?? "",
  });
}

export function toMonitoredAsset(row: MonitoredAssetRow): MonitoredAsset {
  const meteredUsage = row.meteredUsage ? fromJsonString(MeteredUsageSchema, row.meteredUsage) : undefined;
  const balanceUsage = row.balanceUsage ? fromJsonString(BalanceUsageSchema, row.balanceUsage) : undefined;
  return create(MonitoredAssetSchema, {
    id: row.id,
    entitlementId: row.entitlementId ?? "",
    productId: row.productId,
    metricName: row.metricName,
    name: row.name,
    description: row.description ?? "",
    unit: row.unit,
    category: row.category,
    numberFormat: row.numberFormat,
    metricType: row.metricType,
    meteredUsageId: meteredUsage?.id ?? "",
    meteredUsage,
    balanceUsageId: balanceUsage?.id ?? "",
    balanceUsage,
    allowedBackDatingTolerance: row.allowedBackDatingTolerance
      ? fromJsonString(DurationSchema, JSON.stringify(row.allowedBackDatingTolerance))
      : undefined,
  });
}

/** The instant a date column stores for `timestamp`: truncated to the millisecond, as filters compare it. */
export function storedDate(timestamp: Timestamp): Date {
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1_000_000));
}

export function productInformationText(info: ProductInformation | undefined): string | null {
  return info ? toJsonString(ProductInformationSchema, info) : null;
}

export function propertyValuesText(values: Record<string, PropertyValue>): string | null {
  const entries = Object.entries(values);
  if (entries.length === 0) return null;
  return JSON.stringify(
    Object.fromEntries(entries.map(([key, value]) => [key, JSON.parse(toJsonString(PropertyValueSchema, value))])),
  );
}

export function parsePropertyValues(text: string | null): Record<string, PropertyValue> {
  if (!text) return {};
  const parsed = JSON.parse(text) as Record<string, JsonValue>;
  return Object.fromEntries(
    Object.entries(parsed).map(([key, value]) => [key, fromJsonString(PropertyValueSchema, JSON.stringify(value))]),
  );
}

export function meteredUsageText(usage: MeteredUsage | undefined): string | null {
  return usage ? toJsonString(MeteredUsageSchema, usage) : null;
}

export function balanceUsageText(usage: BalanceUsage | undefined): string | null {
  return usage ? toJsonString(BalanceUsageSchema, usage) : null;
}

export function durationText(duration: Duration | undefined): string | null {
  return duration ? (JSON.parse(toJsonString(DurationSchema, duration)) as string) : null;
}
