import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type TryPreallocateRequest,
  type TryPreallocateResponse,
  TryPreallocateResponseSchema,
} from "../../gen/provision/v1/usage_pb.js";
import { runningSessionOfCall, type SessionOfCall } from "../licensing/live-session.js";
import { invalidArgument } from "../platform/errors.js";
import { countersUnavailable } from "./guarded-meters.js";
import type { MeterRef } from "./meter-counters.js";
import { preallocationResultOf } from "./preallocation-result.js";
import { toMicro } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import { BalancePeriodMoved } from "./usage-balance-store.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import type { EntitlementUsage } from "./usage-directory.js";
import { entitlementUsageOf, meteredAssetOf } from "./usage-lookup.js";
import { RECORD_KIND } from "./usage-store.js";

const MAX_ATTEMPTS = 8;

/**
 * Reserves the amount in the metric's counter (one atomic step that refuses what would enter a Block tier or
 * pass the credits left), records it, and answers where the metric stands. A refusal reserves nothing.
 */
export async function tryPreallocate(
  deps: UsageDependencies,
  request: TryPreallocateRequest,
  context: HandlerContext,
): Promise<TryPreallocateResponse> {
  const caller = await runningSessionOfCall(deps.sessions, request.sessionId, context);
  return reserveAndRecord(deps, await preallocationTarget(deps, caller, request.metric, amountOf(request.amount)));
}

/** What a pre-allocation reserves against: its session, the entitlement's usage, the metric's asset. */
export interface PreallocationTarget {
  caller: SessionOfCall;
  usage: EntitlementUsage;
  asset: UsageAsset;
  amountMicro: number;
}

/** The target of a pre-allocation of `amountMicro` of `metric`, checked; nothing is reserved yet. */
export async function preallocationTarget(
  deps: UsageDependencies,
  caller: SessionOfCall,
  metric: string,
  amountMicro: number,
): Promise<PreallocationTarget> {
  const usage = await entitlementUsageOf(deps, caller.entitlementId);
  return { caller, usage, asset: meteredAssetOf(usage, metric, "metric"), amountMicro };
}

/** Reserves the amount and records the grant (see tryPreallocate). */
export async function reserveAndRecord(
  deps: UsageDependencies,
  { caller, usage, asset, amountMicro }: PreallocationTarget,
): Promise<TryPreallocateResponse> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const now = deps.clock.now();
    const ref = (await deps.counters.refOf(usage, asset, now)) as MeterRef;
    try {
      const outcome = await deps.counters.reserve(ref, amountMicro);
      if (outcome.kind === "refused") {
        await deps.counters.confirmRefusal(ref);
        return answer(preallocationResultOf(asset, outcome.value, outcome.limit, false));
      }
      const written = await deps.grants.write({
        ref,
        reserved: outcome,
        amountMicro,
        record: {
          providerId: usage.providerId,
          entitlementId: usage.entitlementId,
          assetId: asset.id,
          sessionId: caller.sessionId,
          transactionId: null,
          kind: RECORD_KIND.preallocation,
          amountMicro,
          periodStart: ref.periodStart,
          occurredAt: now,
          recordedAt: now,
        },
      });
      if (written.written) return answer(preallocationResultOf(asset, outcome.after, outcome.limit, true));
      await deps.counters.awaitGeneration(ref, written.generation);
    } catch (error) {
      if (!(error instanceof BalancePeriodMoved)) throw error;
      deps.counters.balanceMoved(asset.id);
    }
  }
  throw countersUnavailable("they keep changing");
}

/** The amount in millionths; an invalid-argument DomainError unless positive and at most 10^9. */
export function amountOf(amount: number): number {
  const micro = toMicro(amount);
  if (micro === undefined || micro <= 0) {
    throw invalidArgument("amount must be a positive number of at most 10^9 units", [
      { field: "amount", message: "must be a positive number of at most 10^9 units" },
    ]);
  }
  return micro;
}

function answer(result: TryPreallocateResponse["preallocationResult"]): TryPreallocateResponse {
  return create(TryPreallocateResponseSchema, { preallocationResult: result });
}
