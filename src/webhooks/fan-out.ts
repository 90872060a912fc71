import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { inBatchedTransaction } from "../platform/statement-batch.js";
import { DELIVERY_STATUS, type DeliveryStore } from "./delivery-store.js";
import type { WebhookDeliveryRow, WebhookEventRow, WebhookSubscriptionRow } from "./entities.js";
import { matchesSubscription } from "./subscription-filter.js";
import type { SubscriptionStore } from "./subscription-store.js";

/** Events matched per transaction. */
export const FAN_OUT_BATCH = 200;

export interface FanOutDependencies {
  dataSource: DataSource;
  deliveries: DeliveryStore;
  subscriptions: SubscriptionStore;
}

/**
 * Matches a batch of outbox events to subscriptions and creates their deliveries, in one transaction; the
 * events are locked (and passed over by other instances) until it commits. Answers how many events it took.
 * Three batches of statements: the events, their providers' subscriptions, and the deliveries with the commit.
 */
export function fanOut(deps: FanOutDependencies, now: Date): Promise<number> {
  return inBatchedTransaction(deps.dataSource, async (transaction) => {
    const [found] = await transaction.run([deps.deliveries.unfannedEventsStatement(FAN_OUT_BATCH)]);
    const events = deps.deliveries.eventsFrom(found);
    if (events.length === 0) return 0;
    const broadcast = events.filter((event) => event.targetSubscriptionId === null);
    const providers = [...new Set(broadcast.map((event) => event.providerId))];
    const [receiving] = await transaction.run(deps.subscriptions.receivingOfStatements(providers));
    const subscriptions = deps.subscriptions.rowsFrom(receiving);
    const rows: WebhookDeliveryRow[] = [];
    for (const event of events) {
      if (event.targetSubscriptionId !== null) rows.push(deliveryOf(event, event.targetSubscriptionId, now));
      else rows.push(...matchedDeliveries(event, subscriptions, now));
    }
    await transaction.commitWith([
      ...deps.deliveries.insertDeliveriesStatements(rows),
      ...deps.deliveries.markFannedOutStatements(
        events.map((event) => event.id),
        now,
      ),
    ]);
    return events.length;
  });
}

function matchedDeliveries(event: WebhookEventRow, subscriptions: WebhookSubscriptionRow[], now: Date) {
  const envelope = JSON.parse(event.payload) as Record<string, unknown>;
  const { data, ...attributes } = envelope;
  const candidate = {
    type: event.type,
    entityKind: event.entityKind,
    attributes: Object.fromEntries(Object.entries(attributes).map(([name, value]) => [name, String(value)])),
    data: (data ?? {}) as Record<string, unknown>,
    severity: severityOf(data),
  };
  return subscriptions
    .filter((subscription) => subscription.providerId === event.providerId)
    .filter((subscription) =>
      matchesSubscription(
        {
          eventTypes: JSON.parse(subscription.eventTypes),
          filter: subscription.filter ? JSON.parse(subscription.filter) : undefined,
        },
        candidate,
      ),
    )
    .map((subscription) =>
      deliveryOf(event, subscription.id, subscription.state === SubscriptionState.ACTIVE ? now : null, now),
    );
}

/** A pending delivery, due at `dueAt` (null: parked until its subscription is Active). */
function deliveryOf(
  event: WebhookEventRow,
  subscriptionId: string,
  dueAt: Date | null,
  now = dueAt,
): WebhookDeliveryRow {
  return {
    id: randomUUID(),
    providerId: event.providerId,
    subscriptionId,
    eventId: event.id,
    eventType: event.type,
    isTest: event.isTest,
    status: DELIVERY_STATUS.pending,
    attemptCount: 0,
    scheduleStep: 0,
    nextAttemptAt: dueAt,
    claimId: null,
    lastAttemptAt: null,
    lastStatusCode: 0,
    lastError: "",
    createdAt: now ?? event.createdAt,
    completedAt: null,
  };
}

/** The OverageSeverity an overage or balance event's `data.severity` carries; undefined for other events. */
function severityOf(data: unknown): number | undefined {
  const severity = (data as { severity?: unknown } | undefined)?.severity;
  return typeof severity === "number" && severity > 0 ? severity : undefined;
}
