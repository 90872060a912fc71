// Deep imports: typeorm's index loads its whole CLI and every driver, slowing start-up.
import { EntitySchema } from "typeorm/entity-schema/EntitySchema.js";

/** A log entry or a metric sample a running application sent for its session. */
export interface SessionRecordRow {
  /** Auto-increment, as a decimal string (it may pass 2^53 on MySQL). */
  id: string;
  providerId: string;
  entitlementId: string;
  sessionId: string;
  /** The item's transactionId as a decimal string; null when it carried none. */
  transactionId: string | null;
  /** Logs: the level, lower case. Metrics: the metric name. */
  eventName: string;
  eventData: string;
  occurredAt: Date;
  recordedAt: Date;
}

export interface RatingRow {
  id: string;
  providerId: string;
  entitlementId: string;
  sessionId: string;
  productId: string;
  /** The catalog feature; null for the product as a whole. */
  featureId: string | null;
  rating: number;
  remark: string | null;
  createdAt: Date;
}

const uuid = (name: string, nullable = false) => ({ name, type: "varchar", length: 36, nullable }) as const;
const datetime = (name: string) => ({ name, type: "datetime", precision: 3 }) as const;

function sessionRecordEntity(name: string, tableName: string) {
  return new EntitySchema<SessionRecordRow>({
    name,
    tableName,
    columns: {
      id: { type: "bigint", primary: true, generated: "increment" },
      providerId: uuid("provider_id"),
      entitlementId: uuid("entitlement_id"),
      sessionId: uuid("session_id"),
      transactionId: { name: "transaction_id", type: "bigint", nullable: true },
      eventName: { name: "event_name", type: "varchar", length: 128 },
      eventData: { name: "event_data", type: "text", nullable: true },
      occurredAt: datetime("occurred_at"),
      recordedAt: datetime("recorded_at"),
    },
  });
}

export const SessionLogEntity = sessionRecordEntity("SessionLog", "session_logs");
export const SessionMetricEntity = sessionRecordEntity("SessionMetric", "session_metrics");

export const RatingEntity = new EntitySchema<RatingRow>({
  name: "Rating",
  tableName: "ratings",
  columns: {
    id: { type: "varchar", length: 36, primary: true },
    providerId: uuid("provider_id"),
    entitlementId: uuid("entitlement_id"),
    sessionId: uuid("session_id"),
    productId: uuid("product_id"),
    featureId: uuid("feature_id", true),
    rating: { type: "int" },
    remark: { type: "varchar", length: 2000, nullable: true },
    createdAt: datetime("created_at"),
  },
});

export const observabilityEntities = [SessionLogEntity, SessionMetricEntity, RatingEntity];
