import type { DataSource } from "typeorm";
import type { Clock } from "../platform/clock.js";
import type { CallbackGrants } from "./callback-grants.js";
import type { DeliveryStore } from "./delivery-store.js";
import type { Outbox } from "./outbox.js";
import type { HostLookup } from "./safe-resolve.js";
import type { SubscriptionStore } from "./subscription-store.js";
import type { TrustedTargets } from "./target-policy.js";

/** What the WebhookService's RPCs work with. */
export interface WebhookDependencies {
  dataSource: DataSource;
  subscriptions: SubscriptionStore;
  deliveries: DeliveryStore;
  outbox: Outbox;
  clock: Clock;
  newId: () => string;
  keyEncryptionKey: Buffer | undefined;
  trustedTargets: TrustedTargets;
  /** Resolves a host name to its addresses (DNS by default; tests inject their own). */
  lookup?: HostLookup;
  /** Told of every change of a subscription, which its callback tokens answer to. */
  callbackGrants?: CallbackGrants;
}
