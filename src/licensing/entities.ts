// Deep imports: typeorm's index loads its whole CLI and every driver, slowing start-up.
import { EntitySchema } from "typeorm/entity-schema/EntitySchema.js";

export interface EntitlementRow {
  id: string;
  providerId: string;
  name: string;
  description: string | null;
  version: string;
  legalNoticeHtml: string | null;
  customerContactEmail: string;
  customerContactName: string;
  customerId: string;
  allowLicenseActivation: boolean;
  /** NULL when empty. */
  licenseKey: string | null;
  expirationDateTime: Date | null;
  isEntitlementTrial: boolean;
  isRevoked: boolean;
  isTemplate: boolean;
  /** Set on templates only. */
  templateName: string | null;
  templateVersion: string | null;
  orderId: string;
  reference: string;
  /** ActivationPolicy in protobuf JSON, or NULL. */
  activationPolicy: string | null;
  /** Incremented by every change. Nothing reads it yet: the standing caches are invalidated by messages. */
  revision: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface EntitlementProductRow {
  entitlementId: string;
  productId: string;
  position: number;
}

export interface EntitlementFeatureRow {
  id: string;
  entitlementId: string;
  productId: string;
  sourceFeatureId: string;
  featureCode: string | null;
  moduleName: string;
  featurePath: string;
  name: string;
  description: string | null;
  value: string | null;
  version: string;
  isEnabled: boolean;
  isAvailableDuringTrialPeriod: boolean;
  isAvailableDuringGracePeriod: boolean;
  canModifyValueOnEntitlement: boolean;
  canModifyEnabledOnEntitlement: boolean;
  meteredAssetId: string | null;
  featureExpiration: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface ActivationCodeRow {
  id: string;
  providerId: string;
  entitlementId: string;
  /** As issued. */
  code: string;
  /** Upper case, without dashes or spaces: the form looked up. */
  codeKey: string;
  requiredAuthenticationLevel: number;
  email: string;
  userId: string;
  organizationGroupId: string;
  fingerprint: string;
  /** JSON array of strings. */
  preAuthorizedDevices: string | null;
  maxDeviceActivations: number;
  activationCodeUseCount: number;
  maxActivationCodeUseCount: number;
  verificationCodeUseCount: number;
  maxVerificationCodeUseCount: number;
  userConsent: boolean;
  requiresUserConsent: boolean;
  sendUserNotification: boolean;
  isTrialActivation: boolean;
  useEntitlementMaxActivations: boolean;
  isDeleted: boolean;
  activationTimeStamp: Date | null;
  expirationTimeStamp: Date | null;
  createdAt: Date;
}

export interface DeviceRow {
  fingerprintHash: string;
  fingerprint: string;
  createdAt: Date;
}

export interface ActivationCodeDeviceRow extends DeviceRow {
  activationCodeId: string;
}

export interface EntitlementDeviceRow extends DeviceRow {
  entitlementId: string;
  activationCodeId: string;
}

/** Stored states; "lapsed" is a live row whose grace has ended. */
export const SESSION_STATE = { live: 1, released: 3, ended: 4 } as const;

export interface LicenseSessionRow {
  id: string;
  providerId: string;
  entitlementId: string;
  activationCodeId: string;
  fingerprint: string;
  fingerprintHash: string;
  state: number;
  isFloating: boolean;
  /**
   * Counted in its entitlement's floating_seat_counts: a live floating session until it ends, is released, or
   * an activation finds its grace over.
   */
  holdsFloatingSeat: boolean;
  /** The activation was a trial: the entitlement's, or the code's (isTrialActivation). */
  isTrial: boolean;
  activatedAt: Date;
  leaseExpiresAt: Date;
  graceEndsAt: Date;
  lastCheckInAt: Date;
  softwareVersion: string;
  clientAddress: string;
  endedAt: Date | null;
}

export interface LicenseSigningKeyRow {
  kid: string;
  providerId: string;
  algorithm: string;
  publicKeySpki: string;
  sealedPrivateKey: string;
  createdAt: Date;
  retiredAt: Date | null;
}

const id = { type: "varchar", length: 36, primary: true } as const;
const uuid = (name: string) => ({ name, type: "varchar", length: 36 }) as const;
const datetime = (name: string, nullable = false) => ({ name, type: "datetime", precision: 3, nullable }) as const;
const bool = (name: string) => ({ name, type: "boolean" }) as const;
const text = (name: string) => ({ name, type: "text", nullable: true }) as const;
const varchar = (name: string, length: number, nullable = false) =>
  ({ name, type: "varchar", length, nullable }) as const;

export const EntitlementEntity = new EntitySchema<EntitlementRow>({
  name: "Entitlement",
  tableName: "entitlements",
  columns: {
    id,
    providerId: uuid("provider_id"),
    name: varchar("name", 255),
    description: text("description"),
    version: varchar("version", 64),
    legalNoticeHtml: text("legal_notice_html"),
    customerContactEmail: varchar("customer_contact_email", 320),
    customerContactName: varchar("customer_contact_name", 255),
    customerId: varchar("customer_id", 36),
    allowLicenseActivation: bool("allow_license_activation"),
    licenseKey: varchar("license_key", 255, true),
    expirationDateTime: datetime("expiration_date_time", true),
    isEntitlementTrial: bool("is_entitlement_trial"),
    isRevoked: bool("is_revoked"),
    isTemplate: bool("is_template"),
    templateName: varchar("template_name", 255, true),
    templateVersion: varchar("template_version", 64, true),
    orderId: varchar("order_id", 255),
    reference: varchar("reference", 255),
    activationPolicy: text("activation_policy"),
    revision: { type: "int" },
    createdAt: datetime("created_at"),
    updatedAt: datetime("updated_at"),
  },
});

export const EntitlementProductEntity = new EntitySchema<EntitlementProductRow>({
  name: "EntitlementProduct",
  tableName: "entitlement_products",
  columns: {
    entitlementId: { ...uuid("entitlement_id"), primary: true },
    productId: { ...uuid("product_id"), primary: true },
    position: { type: "int" },
  },
});

export const EntitlementFeatureEntity = new EntitySchema<EntitlementFeatureRow>({
  name: "EntitlementFeature",
  tableName: "entitlement_features",
  columns: {
    id,
    entitlementId: uuid("entitlement_id"),
    productId: uuid("product_id"),
    sourceFeatureId: uuid("source_feature_id"),
    featureCode: varchar("feature_code", 128, true),
    moduleName: varchar("module_name", 255),
    featurePath: varchar("feature_path", 512),
    name: varchar("name", 255),
    description: text("description"),
    value: text("value"),
    version: varchar("version", 64),
    isEnabled: bool("is_enabled"),
    isAvailableDuringTrialPeriod: bool("is_available_during_trial_period"),
    isAvailableDuringGracePeriod: bool("is_available_during_grace_period"),
    canModifyValueOnEntitlement: bool("can_modify_value_on_entitlement"),
    canModifyEnabledOnEntitlement: bool("can_modify_enabled_on_entitlement"),
    meteredAssetId: { ...uuid("metered_asset_id"), nullable: true },
    featureExpiration: datetime("feature_expiration", true),
    createdAt: datetime("created_at"),
    updatedAt: datetime("updated_at"),
  },
});

export const ActivationCodeEntity = new EntitySchema<ActivationCodeRow>({
  name: "ActivationCode",
  tableName: "activation_codes",
  columns: {
    id,
    providerId: uuid("provider_id"),
    entitlementId: uuid("entitlement_id"),
    code: varchar("code", 64),
    codeKey: varchar("code_key", 64),
    requiredAuthenticationLevel: { name: "required_authentication_level", type: "int" },
    email: varchar("email", 320),
    userId: varchar("user_id", 36),
    organizationGroupId: varchar("organization_group_id", 36),
    fingerprint: varchar("fingerprint", 512),
    preAuthorizedDevices: text("pre_authorized_devices"),
    maxDeviceActivations: { name: "max_device_activations", type: "int" },
    activationCodeUseCount: { name: "activation_code_use_count", type: "int" },
    maxActivationCodeUseCount: { name: "max_activation_code_use_count", type: "int" },
    verificationCodeUseCount: { name: "verification_code_use_count", type: "int" },
    maxVerificationCodeUseCount: { name: "max_verification_code_use_count", type: "int" },
    userConsent: bool("user_consent"),
    requiresUserConsent: bool("requires_user_consent"),
    sendUserNotification: bool("send_user_notification"),
    isTrialActivation: bool("is_trial_activation"),
    useEntitlementMaxActivations: bool("use_entitlement_max_activations"),
    isDeleted: bool("is_deleted"),
    activationTimeStamp: datetime("activation_time_stamp", true),
    expirationTimeStamp: datetime("expiration_time_stamp", true),
    createdAt: datetime("created_at"),
  },
});

const deviceColumns = {
  fingerprintHash: { name: "fingerprint_hash", type: "varchar", length: 64, primary: true },
  fingerprint: varchar("fingerprint", 512),
  createdAt: datetime("created_at"),
} as const;

export const ActivationCodeDeviceEntity = new EntitySchema<ActivationCodeDeviceRow>({
  name: "ActivationCodeDevice",
  tableName: "activation_code_devices",
  columns: { activationCodeId: { ...uuid("activation_code_id"), primary: true }, ...deviceColumns },
});

export const EntitlementDeviceEntity = new EntitySchema<EntitlementDeviceRow>({
  name: "EntitlementDevice",
  tableName: "entitlement_devices",
  columns: {
    entitlementId: { ...uuid("entitlement_id"), primary: true },
    activationCodeId: uuid("activation_code_id"),
    ...deviceColumns,
  },
});

export const LicenseSessionEntity = new EntitySchema<LicenseSessionRow>({
  name: "LicenseSession",
  tableName: "license_sessions",
  columns: {
    id,
    providerId: uuid("provider_id"),
    entitlementId: uuid("entitlement_id"),
    activationCodeId: uuid("activation_code_id"),
    fingerprint: varchar("fingerprint", 512),
    fingerprintHash: varchar("fingerprint_hash", 64),
    state: { type: "int" },
    isFloating: bool("is_floating"),
    holdsFloatingSeat: bool("holds_floating_seat"),
    isTrial: bool("is_trial"),
    activatedAt: datetime("activated_at"),
    leaseExpiresAt: datetime("lease_expires_at"),
    graceEndsAt: datetime("grace_ends_at"),
    lastCheckInAt: datetime("last_check_in_at"),
    softwareVersion: varchar("software_version", 255),
    clientAddress: varchar("client_address", 64),
    endedAt: datetime("ended_at", true),
  },
});

export const LicenseSigningKeyEntity = new EntitySchema<LicenseSigningKeyRow>({
  name: "LicenseSigningKey",
  tableName: "license_signing_keys",
  columns: {
    kid: { name: "kid", type: "varchar", length: 64, primary: true },
    providerId: uuid("provider_id"),
    algorithm: varchar("algorithm", 16),
    publicKeySpki: text("public_key_spki"),
    sealedPrivateKey: text("sealed_private_key"),
    createdAt: datetime("created_at"),
    retiredAt: datetime("retired_at", true),
  },
});

export const licensingEntities = [
  EntitlementEntity,
  EntitlementProductEntity,
  EntitlementFeatureEntity,
  ActivationCodeEntity,
  ActivationCodeDeviceEntity,
  EntitlementDeviceEntity,
  LicenseSessionEntity,
  LicenseSigningKeyEntity,
];
