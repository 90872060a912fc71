import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";

/** States whose subscriptions receive broadcast events (Suspended ones keep them parked until re-enabled). */
const RECEIVING_STATES = [SubscriptionState.ACTIVE, SubscriptionState.SUSPENDED];

/**
 * The SQL condition on a `webhook_subscriptions` row that receives broadcast events: a receiving state, or
 * verified once and pending verification again (a new URL), and not deleted.
 */
export const RECEIVING_CONDITION = {
  sql: `(state IN (${RECEIVING_STATES.map(() => "?").join(", ")}) OR (state = ? AND verified_at IS NOT NULL)) AND deleted_at IS NULL`,
  parameters: [...RECEIVING_STATES, SubscriptionState.PENDING_VERIFICATION],
};

/** The wire names of `webhook-timestamp` formats. */
export const TIMESTAMP_FORMATS = ["rfc3339", "unix"] as const;
export type TimestampFormat = (typeof TIMESTAMP_FORMATS)[number];
