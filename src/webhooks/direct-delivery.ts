import { create } from "@bufbuild/protobuf";
import type { EntityManager } from "typeorm";
import { RegistrationChallengeDataSchema } from "../../gen/provision/v1/webhook_events_pb.js";
import { newChallenge } from "./challenge.js";
import { DELIVERY_STATUS } from "./delivery-store.js";
import type { WebhookDeliveryRow, WebhookSubscriptionRow } from "./entities.js";
import { CHALLENGE_EVENT_TYPE } from "./event-catalog.js";
import type { EventDraft } from "./outbox.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

/**
 * An event for one subscription (a challenge, a test-fire), written with its delivery in the caller's
 * transaction: it is not matched against other subscriptions. Answers the delivery.
 */
export async function deliverDirectly(
  deps: WebhookDependencies,
  manager: EntityManager,
  draft: Omit<EventDraft, "targetSubscriptionId">,
  subscription: WebhookSubscriptionRow,
): Promise<WebhookDeliveryRow> {
  const [eventId] = await deps.outbox.append(manager, [{ ...draft, targetSubscriptionId: subscription.id }]);
  await deps.deliveries.markFannedOut(manager, [eventId], draft.time);
  const delivery: WebhookDeliveryRow = {
    id: deps.newId(),
    providerId: subscription.providerId,
    subscriptionId: subscription.id,
    eventId,
    eventType: draft.type,
    isTest: draft.isTest ?? false,
    status: DELIVERY_STATUS.pending,
    attemptCount: 0,
    scheduleStep: 0,
    nextAttemptAt: draft.time,
    claimId: null,
    lastAttemptAt: null,
    lastStatusCode: 0,
    lastError: "",
    createdAt: draft.time,
    completedAt: null,
  };
  await deps.deliveries.insertDeliveries(manager, [delivery]);
  return delivery;
}

/**
 * Sends a new registration challenge: the subscription is PendingVerification until its endpoint answers this
 * one (an earlier challenge still pending is cancelled). Changes `subscription` in place; the caller saves it.
 */
export async function sendChallenge(
  deps: WebhookDependencies,
  manager: EntityManager,
  subscription: WebhookSubscriptionRow,
  now: Date,
): Promise<WebhookDeliveryRow> {
  if (subscription.challengeDeliveryId) {
    await deps.deliveries.cancelDelivery(manager, subscription.challengeDeliveryId, now);
  }
  const delivery = await deliverDirectly(
    deps,
    manager,
    {
      providerId: subscription.providerId,
      type: CHALLENGE_EVENT_TYPE,
      entityKind: "webhook-subscription",
      entityId: subscription.id,
      subject: `webhook-subscriptions/${subscription.id}`,
      eventVersion: 1,
      time: now,
      dataSchema: RegistrationChallengeDataSchema,
      data: create(RegistrationChallengeDataSchema, { challenge: newChallenge(), subscriptionId: subscription.id }),
    },
    subscription,
  );
  subscription.challengeDeliveryId = delivery.id;
  return delivery;
}
