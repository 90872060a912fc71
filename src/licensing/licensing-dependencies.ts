import type { DataSource } from "typeorm";
import type { Entitlement } from "../../gen/provision/v1/entitlement_pb.js";
import type { CatalogRepository } from "../catalog/catalog-repository.js";
import type { Clock } from "../platform/clock.js";
import type { Outbox } from "../webhooks/outbox.js";
import type { EntitlementTurns } from "./entitlement-turns.js";
import type { SessionStore } from "./session-store.js";

/** What the licensing services are built from. */
export interface LicensingDependencies {
  dataSource: DataSource;
  /** Products and their features and assets, to copy onto entitlements. */
  catalog: CatalogRepository;
  clock: Clock;
  newId: () => string;
  /**
   * Tells every instance that an entitlement changed, once the change is committed: cached standings used by
   * check-in are dropped. Call it after every committed write to an entitlement's row, products or features.
   */
  entitlementChanged: (entitlementId: string) => Promise<void>;
  /** Seats and sessions. */
  store: SessionStore;
  /** Tells every instance that these sessions changed (ended, released, renewed), once committed. */
  sessionsChanged: (...sessionIds: string[]) => Promise<void>;
  /** Webhook events, written in the transaction of the change that causes them. */
  events: Outbox;
  entitlementTurns: EntitlementTurns;
  /**
   * Fills an entitlement's own monitored assets with their live usage (metering provides it); without it they
   * show their definitions only.
   */
  liveAssetUsage?: (entitlement: Entitlement) => Promise<void>;
}
