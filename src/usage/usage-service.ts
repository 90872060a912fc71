import type { ServiceImpl } from "@connectrpc/connect";
import type { UsageService } from "../../gen/provision/v1/usage_pb.js";
import { recordUsageTransactions } from "./record-usage.js";
import { tryPreallocate } from "./try-preallocate.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** UsageService: each RPC handed to its named function. */
export function createUsageService(deps: UsageDependencies): ServiceImpl<typeof UsageService> {
  return {
    recordUsageTransactions: (request, context) => recordUsageTransactions(deps, request, context),
    tryPreallocate: (request, context) => tryPreallocate(deps, request, context),
  };
}
