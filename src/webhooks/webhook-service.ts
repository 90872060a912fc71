import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ListEventSchemasResponseSchema, type WebhookService } from "../../gen/provision/v1/webhook_pb.js";
import * as deliveries from "./delivery-admin.js";
import { eventSchemas } from "./event-schemas.js";
import * as subscriptions from "./subscription-admin.js";
import { updateSubscription } from "./subscription-update.js";
import { testFireSubscription } from "./test-fire.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

/** WebhookService: each RPC handed to its named function. */
export function createWebhookService(deps: WebhookDependencies): ServiceImpl<typeof WebhookService> {
  return {
    createSubscription: (request, context) => subscriptions.createSubscription(deps, request, context),
    listSubscriptions: (request, context) => subscriptions.listSubscriptions(deps, request, context),
    getSubscription: (request, context) => subscriptions.getSubscription(deps, request, context),
    updateSubscription: (request, context) => updateSubscription(deps, request, context),
    deleteSubscription: (request, context) => subscriptions.deleteSubscription(deps, request, context),
    verifySubscription: (request, context) => subscriptions.verifySubscription(deps, request, context),
    rotateSubscriptionSecret: (request, context) => subscriptions.rotateSubscriptionSecret(deps, request, context),
    testFireSubscription: (request, context) => testFireSubscription(deps, request, context),
    listDeliveries: (request, context) => deliveries.listDeliveries(deps, request, context),
    getDelivery: (request, context) => deliveries.getDelivery(deps, request, context),
    requeueDelivery: (request, context) => deliveries.requeueDelivery(deps, request, context),
    requeueFailedDeliveries: (request, context) => deliveries.requeueFailedDeliveries(deps, request, context),
    listEventSchemas: async () => create(ListEventSchemasResponseSchema, { eventSchemas: [...eventSchemas()] }),
  };
}
