import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  SubscriptionState,
  type TestFireSubscriptionRequest,
  type TestFireSubscriptionResponse,
  TestFireSubscriptionResponseSchema,
} from "../../gen/provision/v1/webhook_pb.js";
import { DomainError, invalidField } from "../platform/errors.js";
import { deliverDirectly } from "./direct-delivery.js";
import { CHALLENGE_EVENT_TYPE, findEventType } from "./event-catalog.js";
import { changeSubscription } from "./subscription-admin.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

/**
 * A sample event of the chosen type, `data._test` true, through the whole pipeline (signing, retries, audit) to
 * this subscription alone, whatever its event types and filter. Only an Active subscription takes one.
 */
export async function testFireSubscription(
  deps: WebhookDependencies,
  request: TestFireSubscriptionRequest,
  context: HandlerContext,
): Promise<TestFireSubscriptionResponse> {
  const entry = findEventType(request.eventType);
  if (!entry?.dataSchema || entry.type === CHALLENGE_EVENT_TYPE) {
    throw invalidField("eventType", "must be an event type the service sends (see GET /api/v1/webhooks/schemas)");
  }
  const dataSchema = entry.dataSchema;
  const { result } = await changeSubscription(deps, context, request.id, async (row, manager, now) => {
    if (row.state !== SubscriptionState.ACTIVE) {
      throw new DomainError("failed-precondition", "test-fire needs an Active subscription", {
        slug: "subscription-state",
      });
    }
    const sampleId = deps.newId();
    return deliverDirectly(
      deps,
      manager,
      {
        providerId: row.providerId,
        type: entry.type,
        entityKind: entry.entityKind,
        entityId: sampleId,
        subject: `${entry.entityKind}s/${sampleId}`,
        eventVersion: entry.eventVersion,
        time: now,
        dataSchema,
        data: create(dataSchema),
        isTest: true,
      },
      row,
    );
  });
  return create(TestFireSubscriptionResponseSchema, { deliveryId: result.id, eventId: result.eventId });
}
