import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { ActivationService } from "../gen/provision/v1/activation_pb.js";
import { CatalogService } from "../gen/provision/v1/catalog_pb.js";
import { ClientAdminService } from "../gen/provision/v1/client_admin_pb.js";
import { EntitlementService } from "../gen/provision/v1/entitlement_pb.js";
import { FeedbackService } from "../gen/provision/v1/feedback_pb.js";
import { ObservabilityService } from "../gen/provision/v1/observability_pb.js";
import { UsageService } from "../gen/provision/v1/usage_pb.js";
import { WebhookService } from "../gen/provision/v1/webhook_pb.js";
import { type ClientAdminDependencies, createClientAdminService } from "./auth/client-admin-service.js";
import { type CatalogDependencies, createCatalogService } from "./catalog/catalog-service.js";

/** Every service of the contract; REST routes are read from these, and Connect/gRPC serve them. */
export const ALL_SERVICES: DescService[] = [
  CatalogService,
  EntitlementService,
  ActivationService,
  UsageService,
  ObservabilityService,
  FeedbackService,
  WebhookService,
  ClientAdminService,
];

export type ServiceDependencies = CatalogDependencies & ClientAdminDependencies;

/**
 * Registers every service. A service without an implementation yet is registered empty: connect answers
 * each of its RPCs with `unimplemented` (HTTP 501 on REST), visibly.
 */
export function registerServices(deps: ServiceDependencies): (router: ConnectRouter) => void {
  const catalog = createCatalogService(deps);
  const clientAdmin = createClientAdminService(deps);
  return (router) => {
    router.service(CatalogService, catalog);
    router.service(ClientAdminService, clientAdmin);
    for (const service of ALL_SERVICES) {
      if (service !== CatalogService && service !== ClientAdminService) router.service(service, {});
    }
  };
}
