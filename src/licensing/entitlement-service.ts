import type { ServiceImpl } from "@connectrpc/connect";
import type { EntitlementService } from "../../gen/provision/v1/entitlement_pb.js";
import * as codes from "./activation-code-admin.js";
import * as entitlements from "./entitlement-admin.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";
import * as sessions from "./session-admin.js";

/** EntitlementService: each RPC handed to its named function. */
export function createEntitlementService(deps: LicensingDependencies): ServiceImpl<typeof EntitlementService> {
  return {
    createEntitlement: (request, context) => entitlements.createEntitlement(deps, request, context),
    getEntitlement: (request, context) => entitlements.getEntitlement(deps, request, context),
    listEntitlements: (request, context) => entitlements.listEntitlements(deps, request, context),
    updateEntitlement: (request, context) => entitlements.updateEntitlement(deps, request, context),
    convertToTemplate: (request, context) => entitlements.convertToTemplate(deps, request, context),
    createFromTemplate: (request, context) => entitlements.createFromTemplate(deps, request, context),
    setActivationEnabled: (request, context) => entitlements.setActivationEnabled(deps, request, context),
    setClaimBasedSeats: (request, context) => entitlements.setClaimBasedSeats(deps, request, context),
    setSubscriptionActive: (request, context) => entitlements.setSubscriptionActive(deps, request, context),
    createActivationCode: (request, context) => codes.createActivationCode(deps, request, context),
    listActivationCodes: (request, context) => codes.listActivationCodes(deps, request, context),
    deleteActivationCode: (request, context) => codes.deleteActivationCode(deps, request, context),
    listSessions: (request, context) => sessions.listSessions(deps, request, context),
    endSession: (request, context) => sessions.endSession(deps, request, context),
  };
}
