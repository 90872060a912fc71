import { create, fromJson } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type Delivery,
  type DeliveryAttempt,
  DeliveryAttemptSchema,
  DeliverySchema,
  type Subscription,
  SubscriptionFilterSchema,
  SubscriptionSchema,
} from "../../gen/provision/v1/webhook_pb.js";
import type { WebhookAttemptRow, WebhookDeliveryRow, WebhookSubscriptionRow } from "./entities.js";

export function toSubscription(row: WebhookSubscriptionRow): Subscription {
  return create(SubscriptionSchema, {
    id: row.id,
    url: row.url,
    eventTypes: JSON.parse(row.eventTypes) as string[],
    filter: row.filter ? fromJson(SubscriptionFilterSchema, JSON.parse(row.filter)) : undefined,
    callbackScopes: JSON.parse(row.callbackScopes) as string[],
    state: row.state,
    description: row.description,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
    timestampFormat: row.timestampFormat,
  });
}

export function toDelivery(row: WebhookDeliveryRow): Delivery {
  return create(DeliverySchema, {
    id: row.id,
    subscriptionId: row.subscriptionId,
    eventId: row.eventId,
    eventType: row.eventType,
    status: row.status,
    attemptCount: row.attemptCount,
    nextAttemptAt: row.nextAttemptAt ? timestampFromDate(row.nextAttemptAt) : undefined,
    lastAttemptAt: row.lastAttemptAt ? timestampFromDate(row.lastAttemptAt) : undefined,
    lastStatusCode: row.lastStatusCode,
    lastError: row.lastError,
    isTest: row.isTest,
    createdAt: timestampFromDate(row.createdAt),
    completedAt: row.completedAt ? timestampFromDate(row.completedAt) : undefined,
  });
}

export function toDeliveryAttempt(row: WebhookAttemptRow): DeliveryAttempt {
  return create(DeliveryAttemptSchema, {
    attempt: row.attempt,
    startedAt: timestampFromDate(row.startedAt),
    duration: durationFromMs(row.durationMs),
    statusCode: row.statusCode,
    error: row.error,
    responseBody: row.responseBody ?? "",
    responseTruncated: row.responseTruncated,
  });
}
