import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type AddCreditsRequest,
  type AddCreditsResponse,
  AddCreditsResponseSchema,
  type GetEntitlementUsageRequest,
  type GetEntitlementUsageResponse,
  GetEntitlementUsageResponseSchema,
  type ListUsageTransactionsRequest,
  type ListUsageTransactionsResponse,
} from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially } from "../platform/database.js";
import { DomainError, invalidArgument, notFound } from "../platform/errors.js";
import { requireUuid } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { assetUsageOf } from "./asset-usage-report.js";
import { addCredits } from "./credit-top-ups.js";
import { toMicro } from "./usage-amounts.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import type { EntitlementUsage } from "./usage-directory.js";
import { listUsageRecords } from "./usage-record-list.js";

/** The provider's entitlement with its assets; another provider's (or none) answers 404. */
async function providersEntitlement(
  deps: UsageDependencies,
  entitlementId: string,
  context: HandlerContext,
): Promise<EntitlementUsage> {
  const id = requireUuid("entitlementId", entitlementId);
  const usage = await deps.directory.of(id);
  if (!usage || usage.providerId !== providerOf(context)) throw notFound("entitlement", id);
  return usage;
}

export async function getEntitlementUsage(
  deps: UsageDependencies,
  request: GetEntitlementUsageRequest,
  context: HandlerContext,
): Promise<GetEntitlementUsageResponse> {
  const usage = await providersEntitlement(deps, request.entitlementId, context);
  const now = deps.clock.now();
  const assets = await readSerially(deps.dataSource, () =>
    Promise.all(usage.assets.map((asset) => assetUsageOf(deps, deps.dataSource.manager, asset, now))),
  );
  return create(GetEntitlementUsageResponseSchema, {
    entitlementId: usage.entitlementId,
    assets,
    serverTime: timestampFromDate(now),
  });
}

export async function listUsageTransactions(
  deps: UsageDependencies,
  request: ListUsageTransactionsRequest,
  context: HandlerContext,
): Promise<ListUsageTransactionsResponse> {
  const usage = await providersEntitlement(deps, request.entitlementId, context);
  return listUsageRecords(deps, usage.entitlementId, request);
}

/** A manual top-up of a credit balance. */
export async function addCreditsCall(
  deps: UsageDependencies,
  request: AddCreditsRequest,
  context: HandlerContext,
): Promise<AddCreditsResponse> {
  const usage = await providersEntitlement(deps, request.entitlementId, context);
  const amountMicro = toMicro(request.amount);
  if (amountMicro === undefined || amountMicro <= 0) {
    throw invalidArgument("amount must be a positive number of at most 10^9 credits", [
      { field: "amount", message: "must be a positive number of at most 10^9 credits" },
    ]);
  }
  const asset = usage.byMetric.get(request.metricName);
  if (!asset) throw notFound("metric", request.metricName);
  if (!asset.balance) {
    throw invalidArgument(`${request.metricName} is not a credit balance (metricType 2)`, [
      { field: "metricName", message: "must name a credit-balance asset" },
    ]);
  }
  if (asset.balance.unlimited) {
    throw new DomainError("failed-precondition", `${request.metricName} has unlimited credits`, {
      slug: "unlimited-credits",
    });
  }
  await addCredits(deps, usage, asset, amountMicro);
  const now = deps.clock.now();
  const report = await readSerially(deps.dataSource, () => assetUsageOf(deps, deps.dataSource.manager, asset, now));
  return create(AddCreditsResponseSchema, { usage: report });
}
