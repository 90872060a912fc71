// Deep imports: typeorm's index loads its whole CLI and every driver, slowing start-up.
import { EntitySchema } from "typeorm/entity-schema/EntitySchema.js";

export interface ProductRow {
  id: string;
  providerId: string;
  status: number;
  name: string;
  description: string | null;
  productCode: string;
  productVersion: string;
  expirationDate: Date | null;
  externalId: string;
  /** ProductInformation in protobuf JSON. */
  productInformation: string | null;
  /** map<string, PropertyValue> in protobuf JSON. */
  propertyValues: string | null;
  isDeleted: boolean;
  isLocked: boolean;
  productMetaData: string | null;
  productLicenseData: string | null;
  revisionNumber: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface FeatureRow {
  id: string;
  productId: string;
  /** NULL when empty, so that the (product, code) unique index ignores features without a code. */
  featureCode: string | null;
  featurePath: string;
  moduleName: string;
  name: string;
  description: string | null;
  value: string | null;
  version: string;
  usageMetric: string;
  units: string;
  type: string;
  isEnabled: boolean;
  isAvailableDuringTrialPeriod: boolean;
  isAvailableDuringGracePeriod: boolean;
  canModifyValueOnEntitlement: boolean;
  canModifyEnabledOnEntitlement: boolean;
  meteredAssetId: string | null;
  isDeleted: boolean;
  revisionNumber: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface MonitoredAssetRow {
  id: string;
  productId: string;
  entitlementId: string | null;
  metricName: string;
  name: string;
  description: string | null;
  unit: string;
  category: string;
  numberFormat: string;
  metricType: number;
  /** google.protobuf.Duration in protobuf JSON (`"3600s"`), or NULL. */
  allowedBackDatingTolerance: string | null;
  /** MeteredUsage in protobuf JSON, or NULL. */
  meteredUsage: string | null;
  /** BalanceUsage in protobuf JSON, or NULL. */
  balanceUsage: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const timestamps = {
  createdAt: { name: "created_at", type: "datetime", precision: 3 },
  updatedAt: { name: "updated_at", type: "datetime", precision: 3 },
} as const;

export const ProductEntity = new EntitySchema<ProductRow>({
  name: "Product",
  tableName: "products",
  columns: {
    id: { type: "varchar", length: 36, primary: true },
    providerId: { name: "provider_id", type: "varchar", length: 36 },
    status: { type: "int" },
    name: { type: "varchar", length: 255 },
    description: { type: "text", nullable: true },
    productCode: { name: "product_code", type: "varchar", length: 128 },
    productVersion: { name: "product_version", type: "varchar", length: 64 },
    expirationDate: { name: "expiration_date", type: "datetime", precision: 3, nullable: true },
    externalId: { name: "external_id", type: "varchar", length: 255 },
    productInformation: { name: "product_information", type: "text", nullable: true },
    propertyValues: { name: "property_values", type: "text", nullable: true },
    isDeleted: { name: "is_deleted", type: "boolean" },
    isLocked: { name: "is_locked", type: "boolean" },
    productMetaData: { name: "product_meta_data", type: "text", nullable: true },
    productLicenseData: { name: "product_license_data", type: "text", nullable: true },
    revisionNumber: { name: "revision_number", type: "int" },
    ...timestamps,
  },
});

export const FeatureEntity = new EntitySchema<FeatureRow>({
  name: "Feature",
  tableName: "features",
  columns: {
    id: { type: "varchar", length: 36, primary: true },
    productId: { name: "product_id", type: "varchar", length: 36 },
    featureCode: { name: "feature_code", type: "varchar", length: 128, nullable: true },
    featurePath: { name: "feature_path", type: "varchar", length: 512 },
    moduleName: { name: "module_name", type: "varchar", length: 255 },
    name: { type: "varchar", length: 255 },
    description: { type: "text", nullable: true },
    value: { type: "text", nullable: true },
    version: { type: "varchar", length: 64 },
    usageMetric: { name: "usage_metric", type: "varchar", length: 255 },
    units: { type: "varchar", length: 64 },
    type: { type: "varchar", length: 64 },
    isEnabled: { name: "is_enabled", type: "boolean" },
    isAvailableDuringTrialPeriod: { name: "is_available_during_trial_period", type: "boolean" },
    isAvailableDuringGracePeriod: { name: "is_available_during_grace_period", type: "boolean" },
    canModifyValueOnEntitlement: { name: "can_modify_value_on_entitlement", type: "boolean" },
    canModifyEnabledOnEntitlement: { name: "can_modify_enabled_on_entitlement", type: "boolean" },
    meteredAssetId: { name: "metered_asset_id", type: "varchar", length: 36, nullable: true },
    isDeleted: { name: "is_deleted", type: "boolean" },
    revisionNumber: { name: "revision_number", type: "int" },
    ...timestamps,
  },
});

export const MonitoredAssetEntity = new EntitySchema<MonitoredAssetRow>({
  name: "MonitoredAsset",
  tableName: "monitored_assets",
  columns: {
    id: { type: "varchar", length: 36, primary: true },
    productId: { name: "product_id", type: "varchar", length: 36 },
    entitlementId: { name: "entitlement_id", type: "varchar", length: 36, nullable: true },
    metricName: { name: "metric_name", type: "varchar", length: 128 },
    name: { type: "varchar", length: 255 },
    description: { type: "text", nullable: true },
    unit: { type: "varchar", length: 64 },
    category: { type: "varchar", length: 128 },
    numberFormat: { name: "number_format", type: "varchar", length: 64 },
    metricType: { name: "metric_type", type: "int" },
    allowedBackDatingTolerance: { name: "allowed_back_dating_tolerance", type: "varchar", length: 32, nullable: true },
    meteredUsage: { name: "metered_usage", type: "text", nullable: true },
    balanceUsage: { name: "balance_usage", type: "text", nullable: true },
    ...timestamps,
  },
});

export const catalogEntities = [ProductEntity, FeatureEntity, MonitoredAssetEntity];
