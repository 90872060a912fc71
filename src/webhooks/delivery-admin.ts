import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  DeliveryStatusSchema,
  type GetDeliveryRequest,
  type GetDeliveryResponse,
  GetDeliveryResponseSchema,
  type ListDeliveriesRequest,
  type ListDeliveriesResponse,
  ListDeliveriesResponseSchema,
  type RequeueDeliveryRequest,
  type RequeueDeliveryResponse,
  RequeueDeliveryResponseSchema,
  type RequeueFailedDeliveriesRequest,
  type RequeueFailedDeliveriesResponse,
  RequeueFailedDeliveriesResponseSchema,
  SubscriptionState,
} from "../../gen/provision/v1/webhook_pb.js";
import { inTransaction, readSerially } from "../platform/database.js";
import { DomainError, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { DELIVERY_STATUS } from "./delivery-store.js";
import type { WebhookDeliveryRow } from "./entities.js";
import { CHALLENGE_EVENT_TYPE } from "./event-catalog.js";
import { findSubscription } from "./subscription-admin.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";
import { toDelivery, toDeliveryAttempt } from "./webhook-mappers.js";

/** A subscription's deliveries, newest first. */
export async function listDeliveries(
  deps: WebhookDependencies,
  request: ListDeliveriesRequest,
  context: HandlerContext,
): Promise<ListDeliveriesResponse> {
  const subscription = await findSubscription(deps, providerOf(context), request.id);
  const page = resolvePage(request.pageNumber, request.pageSize);
  new Violations().enumValue("status", request.status, DeliveryStatusSchema).throwIfAny();
  const { dataSource } = deps;
  const { rows, total } = await readSerially(dataSource, () =>
    deps.deliveries.page(dataSource.manager, {
      subscriptionId: subscription.id,
      status: request.status,
      eventType: request.eventType,
      offset: page.offset,
      limit: page.pageSize,
    }),
  );
  return create(ListDeliveriesResponseSchema, { ...pageInfo(page, total, rows.length), items: rows.map(toDelivery) });
}

/** One delivery with its attempts and the envelope it sends. */
export async function getDelivery(
  deps: WebhookDependencies,
  request: GetDeliveryRequest,
  context: HandlerContext,
): Promise<GetDeliveryResponse> {
  const deliveryId = requireUuid("deliveryId", request.deliveryId);
  const providerId = providerOf(context);
  const { dataSource, deliveries } = deps;
  const found = await readSerially(dataSource, async () => {
    const delivery = await deliveries.find(dataSource.manager, providerId, deliveryId);
    if (!delivery) return null;
    const attempts = await deliveries.attemptsOf(dataSource.manager, deliveryId);
    const payloads = await deliveries.payloadsOf(dataSource.manager, [delivery.eventId]);
    return { delivery, attempts, payload: payloads.get(delivery.eventId) ?? "" };
  });
  if (!found) throw notFound("delivery", deliveryId);
  return create(GetDeliveryResponseSchema, {
    delivery: toDelivery(found.delivery),
    attempts: found.attempts.map(toDeliveryAttempt),
    payload: found.payload,
  });
}

/** A failed delivery pending again, its retry schedule from the start. */
export async function requeueDelivery(
  deps: WebhookDependencies,
  request: RequeueDeliveryRequest,
  context: HandlerContext,
): Promise<RequeueDeliveryResponse> {
  const deliveryId = requireUuid("deliveryId", request.deliveryId);
  const providerId = providerOf(context);
  const now = deps.clock.now();
  const delivery = await inTransaction(deps.dataSource, async (manager) => {
    const found = await deps.deliveries.find(manager, providerId, deliveryId);
    if (!found) throw notFound("delivery", deliveryId);
    if (found.status !== DELIVERY_STATUS.failed) {
      throw new DomainError("failed-precondition", "only a failed delivery can be requeued", {
        slug: "delivery-not-failed",
      });
    }
    if (found.eventType === CHALLENGE_EVENT_TYPE) {
      throw new DomainError(
        "failed-precondition",
        "a failed registration challenge is not requeued: POST …/subscriptions/{id}/verify, or set state 2 (Active) to send a new one",
        { slug: "challenge-not-requeued" },
      );
    }
    const subscription = await deps.subscriptions.find(manager, providerId, found.subscriptionId);
    if (!subscription) throw notFound("subscription", found.subscriptionId);
    await deps.deliveries.requeue(manager, { id: deliveryId }, dueAt(subscription.state, now));
    return (await deps.deliveries.find(manager, providerId, deliveryId)) as WebhookDeliveryRow;
  });
  deps.outbox.committed();
  return create(RequeueDeliveryResponseSchema, { delivery: toDelivery(delivery) });
}

/** Every failed delivery of the subscription pending again. */
export async function requeueFailedDeliveries(
  deps: WebhookDependencies,
  request: RequeueFailedDeliveriesRequest,
  context: HandlerContext,
): Promise<RequeueFailedDeliveriesResponse> {
  const subscriptionId = requireUuid("id", request.id);
  const providerId = providerOf(context);
  const now = deps.clock.now();
  const requeued = await inTransaction(deps.dataSource, async (manager) => {
    const subscription = await deps.subscriptions.find(manager, providerId, subscriptionId);
    if (!subscription) throw notFound("subscription", subscriptionId);
    return deps.deliveries.requeue(manager, { subscriptionId }, dueAt(subscription.state, now));
  });
  deps.outbox.committed();
  return create(RequeueFailedDeliveriesResponseSchema, { requeued });
}

/** Due now for an Active subscription; parked (null) until it is Active again otherwise. */
function dueAt(state: number, now: Date): Date | null {
  return state === SubscriptionState.ACTIVE ? now : null;
}
