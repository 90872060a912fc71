import type { ScheduledJob } from "../platform/scheduler.js";
import { autoBalance } from "./credit-top-ups.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** Balances topped up per tick at most; the rest wait for the next tick. */
const BALANCES_PER_TICK = 500;

/** Tops credit balances up on their `autoBalanceCronSchedule`, on the one instance holding the scheduler lease. */
export function autoBalanceJob(deps: UsageDependencies): ScheduledJob {
  return {
    name: "credit-auto-balance",
    async run(now) {
      for (const balance of await deps.balances.due(now, BALANCES_PER_TICK)) {
        await autoBalance(deps, balance.assetId, balance.entitlementId);
      }
    },
  };
}
