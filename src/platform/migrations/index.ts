import { CatalogSchema1763740800000 } from "./0001-catalog.js";
import { IdentitySchema1763827200000 } from "./0002-identity.js";
import { LicensingSchema1763913600000 } from "./0003-licensing.js";
import { EntitlementAssets1764000000000 } from "./0004-entitlement-assets.js";
import { UserCodes1764086400000 } from "./0005-user-codes.js";
import { SessionTrial1764172800000 } from "./0006-session-trial.js";
import { Webhooks1764259200000 } from "./0007-webhooks.js";
import { EntitlementNotices1764345600000 } from "./0008-entitlement-notices.js";
import { SubscriptionVerified1764432000000 } from "./0009-subscription-verified.js";
import { Usage1764518400000 } from "./0010-usage.js";
import { UsageStatusRecheck1764604800000 } from "./0011-usage-status-recheck.js";
import { FloatingSeatIndex1764691200000 } from "./0012-floating-seat-index.js";
import { FloatingSeatCounts1764777600000 } from "./0013-floating-seat-counts.js";
import { EntitlementDeviceCounts1764864000000 } from "./0014-entitlement-device-counts.js";
import { CodeDeviceCounts1764950400000 } from "./0015-code-device-counts.js";
import { UsageTransactionIndex1765036800000 } from "./0016-usage-transaction-index.js";
import { CacheInvalidations1765123200000 } from "./0017-cache-invalidations.js";
import { UsageRecheckPeriod1765209600000 } from "./0018-usage-recheck-period.js";
import { PreAuthorizedDeviceLimits1765296000000 } from "./0019-pre-authorized-device-limits.js";
import { ProviderNotices1765382400000 } from "./0020-provider-notices.js";

/** Every migration, oldest first. Never edit one that has shipped: add the next. */
export const migrations = [
  CatalogSchema1763740800000,
  IdentitySchema1763827200000,
  LicensingSchema1763913600000,
  EntitlementAssets1764000000000,
  UserCodes1764086400000,
  SessionTrial1764172800000,
  Webhooks1764259200000,
  EntitlementNotices1764345600000,
  SubscriptionVerified1764432000000,
  Usage1764518400000,
  UsageStatusRecheck1764604800000,
  FloatingSeatIndex1764691200000,
  FloatingSeatCounts1764777600000,
  EntitlementDeviceCounts1764864000000,
  CodeDeviceCounts1764950400000,
  UsageTransactionIndex1765036800000,
  CacheInvalidations1765123200000,
  UsageRecheckPeriod1765209600000,
  PreAuthorizedDeviceLimits1765296000000,
  ProviderNotices1765382400000,
];
