import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { ActivationService } from "../gen/provision/v1/activation_pb.js";
import { CatalogService } from "../gen/provision/v1/catalog_pb.js";
import { ClientAdminService } from "../gen/provision/v1/client_admin_pb.js";
import { EntitlementService } from "../gen/provision/v1/entitlement_pb.js";
import { FeedbackService } from "../gen/provision/v1/feedback_pb.js";
import { ObservabilityService } from "../gen/provision/v1/observability_pb.js";
import { UsageAdminService } from "../gen/provision/v1/usage_admin_pb.js";
import { UsageService } from "../gen/provision/v1/usage_pb.js";
import { WebhookService } from "../gen/provision/v1/webhook_pb.js";
import type { ClientAdminDependencies } from "./auth/client-admin-dependencies.js";
import { createClientAdminService } from "./auth/client-admin-service.js";
import type { CatalogDependencies } from "./catalog/catalog-dependencies.js";
import { createCatalogService } from "./catalog/catalog-service.js";
import { createActivationService } from "./licensing/activation-service.js";
import { createEntitlementService } from "./licensing/entitlement-service.js";
import type { LicensingDependencies } from "./licensing/licensing-dependencies.js";
import type { SessionCallDependencies } from "./licensing/session-calls.js";
import { createFeedbackService } from "./observability/feedback-service.js";
import type { ObservabilityDependencies } from "./observability/observability-dependencies.js";
import { createObservabilityService } from "./observability/observability-service.js";
import { implementation, type ServiceImplementation } from "./server/in-process-rpc.js";
import { createUsageAdminService } from "./usage/usage-admin-service.js";
import type { UsageAdminDependencies, UsageDependencies } from "./usage/usage-dependencies.js";
import { createUsageService } from "./usage/usage-service.js";
import type { WebhookDependencies } from "./webhooks/webhook-dependencies.js";
import { createWebhookService } from "./webhooks/webhook-service.js";

/** Every service of the contract; REST routes are read from these, and Connect/gRPC serve them. */
export const ALL_SERVICES: DescService[] = [
  CatalogService,
  EntitlementService,
  ActivationService,
  UsageService,
  UsageAdminService,
  ObservabilityService,
  FeedbackService,
  WebhookService,
  ClientAdminService,
];

export interface ServiceDependencies extends CatalogDependencies, ClientAdminDependencies {
  licensing: LicensingDependencies;
  activation: SessionCallDependencies;
  webhooks: WebhookDependencies;
  observability: ObservabilityDependencies;
  usageAdmin: UsageAdminDependencies;
  usage: UsageDependencies;
}

/**
 * Every service with its implementation. A service without an implementation yet has an empty one: each of
 * its RPCs answers `unimplemented` (HTTP 501 on REST), visibly.
 */
export function implementServices(deps: ServiceDependencies): ServiceImplementation[] {
  const implemented = new Map([
    implementation(CatalogService, createCatalogService(deps)),
    implementation(ClientAdminService, createClientAdminService(deps)),
    implementation(EntitlementService, createEntitlementService(deps.licensing)),
    implementation(ActivationService, createActivationService(deps.activation)),
    implementation(WebhookService, createWebhookService(deps.webhooks)),
    implementation(ObservabilityService, createObservabilityService(deps.observability)),
    implementation(FeedbackService, createFeedbackService(deps.observability)),
    implementation(UsageAdminService, createUsageAdminService(deps.usageAdmin)),
    implementation(UsageService, createUsageService(deps.usage)),
  ]);
  return ALL_SERVICES.map((service) => [service, implemented.get(service) ?? {}]);
}

/** Registers the implementations with a Connect router (Connect, gRPC and gRPC-Web). */
export function registerServices(implementations: ServiceImplementation[]): (router: ConnectRouter) => void {
  return (router) => {
    for (const [service, impl] of implementations) router.service(service, impl as never);
  };
}
