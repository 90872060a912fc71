import type { ServiceImpl } from "@connectrpc/connect";
import type { ObservabilityService } from "../../gen/provision/v1/observability_pb.js";
import type { ObservabilityDependencies } from "./observability-dependencies.js";
import { recordLogs, recordMetrics } from "./record-session-records.js";

/** ObservabilityService: each RPC handed to its named function. */
export function createObservabilityService(deps: ObservabilityDependencies): ServiceImpl<typeof ObservabilityService> {
  return {
    recordMetrics: (request, context) => recordMetrics(deps, request, context),
    recordLogs: (request, context) => recordLogs(deps, request, context),
  };
}
