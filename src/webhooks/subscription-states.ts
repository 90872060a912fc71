import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";

/** States whose subscriptions receive broadcast events (Suspended ones keep them parked until re-enabled). */
export const RECEIVING_STATES = [SubscriptionState.ACTIVE, SubscriptionState.SUSPENDED];

/** The wire names of `webhook-timestamp` formats. */
export const TIMESTAMP_FORMATS = ["rfc3339", "unix"] as const;
export type TimestampFormat = (typeof TIMESTAMP_FORMATS)[number];
