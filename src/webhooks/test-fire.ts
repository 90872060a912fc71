import { create, type DescMessage } from "@bufbuild/protobuf";
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
  if (entry?.type === CHALLENGE_EVENT_TYPE) {
    throw invalidField("eventType", "cannot be the registration challenge: POST …/subscriptions/{id}/verify sends one");
  }
  if (!entry?.dataSchema) {
    throw invalidField("eventType", "must be an event type the service sends (see GET /api/v1/webhooks/schemas)");
  }
  const dataSchema = entry.dataSchema;
  const { result } = await changeSubscription(deps, context, request.id, async (row, manager, now) => {
    if (row.state !== SubscriptionState.ACTIVE) {
      throw new DomainError("failed-precondition", "test-fire needs an Active subscription", {
        slug: "subscription-state",
      });
    }
    const sample = sampleOf(entry.entityKind, dataSchema, deps.newId(), deps.newId());
    return deliverDirectly(
      deps,
      manager,
      {
        providerId: row.providerId,
        type: entry.type,
        entityKind: entry.entityKind,
        ...sample,
        eventVersion: entry.eventVersion,
        time: now,
        dataSchema,
        isTest: true,
      },
      row,
    );
  });
  return create(TestFireSubscriptionResponseSchema, { deliveryId: result.id, eventId: result.eventId });
}

/**
 * A sample's entity, subject and data, naming one made-up entitlement (and asset, for an asset's event) the way a
 * real event of the kind names its own.
 */
function sampleOf(entityKind: string, dataSchema: DescMessage, entitlementId: string, assetId: string) {
  const named = (field: string) => dataSchema.fields.some((candidate) => candidate.localName === field);
  const data = create(dataSchema, {
    ...(named("entitlementId") ? { entitlementId } : {}),
    ...(named("assetId") ? { assetId } : {}),
  } as never);
  if (entityKind === "monitored-asset") {
    return { entityId: assetId, subject: `entitlements/${entitlementId}/assets/${assetId}`, data };
  }
  return { entityId: entitlementId, subject: `entitlements/${entitlementId}`, data };
}
