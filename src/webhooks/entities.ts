import { EntitySchema } from "typeorm/entity-schema/EntitySchema.js";

export interface WebhookSubscriptionRow {
  id: string;
  providerId: string;
  url: string;
  /** JSON array. */
  eventTypes: string;
  /** JSON object (SubscriptionFilter as REST JSON), or null. */
  filter: string | null;
  /** JSON array. */
  callbackScopes: string;
  callbackClientId: string;
  state: number;
  description: string;
  timestampFormat: string;
  /** Sealed. */
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
  challengeDeliveryId: string | null;
  failingSince: Date | null;
  /** When its endpoint first answered a challenge; null until then. */
  verifiedAt: Date | null;
  deletedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface WebhookEventRow {
  id: string;
  providerId: string;
  type: string;
  entityKind: string;
  entityId: string;
  /** The envelope as every delivery sends it. */
  payload: string;
  isTest: boolean;
  targetSubscriptionId: string | null;
  fannedOutAt: Date | null;
  createdAt: Date;
}

export interface WebhookDeliveryRow {
  id: string;
  providerId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  isTest: boolean;
  status: number;
  attemptCount: number;
  scheduleStep: number;
  nextAttemptAt: Date | null;
  claimId: string | null;
  lastAttemptAt: Date | null;
  lastStatusCode: number;
  lastError: string;
  createdAt: Date;
  completedAt: Date | null;
}

export interface WebhookAttemptRow {
  id: string;
  deliveryId: string;
  attempt: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number;
  error: string;
  responseBody: string | null;
  responseTruncated: boolean;
}

export interface SchedulerLeaseRow {
  name: string;
  holder: string;
  expiresAt: Date;
  acquiredAt: Date;
}

const id = { type: "varchar", length: 36, primary: true } as const;
const uuid = (name: string, nullable = false) => ({ name, type: "varchar", length: 36, nullable }) as const;
const datetime = (name: string, nullable = false) => ({ name, type: "datetime", precision: 3, nullable }) as const;
const bool = (name: string) => ({ name, type: "boolean" }) as const;
const int = (name: string) => ({ name, type: "int" }) as const;
const text = (name: string) => ({ name, type: "text", nullable: true }) as const;
const varchar = (name: string, length: number, nullable = false) =>
  ({ name, type: "varchar", length, nullable }) as const;

export const WebhookSubscriptionEntity = new EntitySchema<WebhookSubscriptionRow>({
  name: "WebhookSubscription",
  tableName: "webhook_subscriptions",
  columns: {
    id,
    providerId: uuid("provider_id"),
    url: varchar("url", 2048),
    eventTypes: text("event_types"),
    filter: text("filter"),
    callbackScopes: text("callback_scopes"),
    callbackClientId: varchar("callback_client_id", 64),
    state: int("state"),
    description: varchar("description", 1024),
    timestampFormat: varchar("timestamp_format", 16),
    secret: text("secret"),
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: datetime("previous_secret_expires_at", true),
    challengeDeliveryId: uuid("challenge_delivery_id", true),
    failingSince: datetime("failing_since", true),
    verifiedAt: datetime("verified_at", true),
    deletedAt: datetime("deleted_at", true),
    createdAt: datetime("created_at"),
    updatedAt: datetime("updated_at"),
  },
});

export const WebhookEventEntity = new EntitySchema<WebhookEventRow>({
  name: "WebhookEvent",
  tableName: "webhook_events",
  columns: {
    id,
    providerId: uuid("provider_id"),
    type: varchar("type", 128),
    entityKind: varchar("entity_kind", 32),
    entityId: varchar("entity_id", 64),
    payload: text("payload"),
    isTest: bool("is_test"),
    targetSubscriptionId: uuid("target_subscription_id", true),
    fannedOutAt: datetime("fanned_out_at", true),
    createdAt: datetime("created_at"),
  },
});

export const WebhookDeliveryEntity = new EntitySchema<WebhookDeliveryRow>({
  name: "WebhookDelivery",
  tableName: "webhook_deliveries",
  columns: {
    id,
    providerId: uuid("provider_id"),
    subscriptionId: uuid("subscription_id"),
    eventId: uuid("event_id"),
    eventType: varchar("event_type", 128),
    isTest: bool("is_test"),
    status: int("status"),
    attemptCount: int("attempt_count"),
    scheduleStep: int("schedule_step"),
    nextAttemptAt: datetime("next_attempt_at", true),
    claimId: varchar("claim_id", 36, true),
    lastAttemptAt: datetime("last_attempt_at", true),
    lastStatusCode: int("last_status_code"),
    lastError: varchar("last_error", 1000),
    createdAt: datetime("created_at"),
    completedAt: datetime("completed_at", true),
  },
});

export const WebhookAttemptEntity = new EntitySchema<WebhookAttemptRow>({
  name: "WebhookAttempt",
  tableName: "webhook_delivery_attempts",
  columns: {
    id,
    deliveryId: uuid("delivery_id"),
    attempt: int("attempt"),
    startedAt: datetime("started_at"),
    durationMs: int("duration_ms"),
    statusCode: int("status_code"),
    error: varchar("error", 1000),
    responseBody: text("response_body"),
    responseTruncated: bool("response_truncated"),
  },
});

export const SchedulerLeaseEntity = new EntitySchema<SchedulerLeaseRow>({
  name: "SchedulerLease",
  tableName: "scheduler_leases",
  columns: {
    name: { name: "name", type: "varchar", length: 64, primary: true },
    holder: varchar("holder", 64),
    expiresAt: datetime("expires_at"),
    acquiredAt: datetime("acquired_at"),
  },
});

export const webhookEntities = [
  WebhookSubscriptionEntity,
  WebhookEventEntity,
  WebhookDeliveryEntity,
  WebhookAttemptEntity,
  SchedulerLeaseEntity,
];
