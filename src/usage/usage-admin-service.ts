import type { ServiceImpl } from "@connectrpc/connect";
import type { UsageAdminService } from "../../gen/provision/v1/usage_admin_pb.js";
import { listRatings } from "../observability/rating-list.js";
import { listSessionLogs, listSessionMetrics } from "../observability/session-record-lists.js";
import * as calls from "./usage-admin-calls.js";
import type { UsageAdminDependencies } from "./usage-dependencies.js";

/** UsageAdminService: each RPC handed to its named function. */
export function createUsageAdminService(deps: UsageAdminDependencies): ServiceImpl<typeof UsageAdminService> {
  return {
    getEntitlementUsage: (request, context) => calls.getEntitlementUsage(deps, request, context),
    listUsageTransactions: (request, context) => calls.listUsageTransactions(deps, request, context),
    addCredits: (request, context) => calls.addCreditsCall(deps, request, context),
    listSessionLogs: (request, context) => listSessionLogs(deps.observability, request, context),
    listSessionMetrics: (request, context) => listSessionMetrics(deps.observability, request, context),
    listRatings: (request, context) => listRatings(deps.observability, request, context),
  };
}
