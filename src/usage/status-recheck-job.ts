import type { EntityManager } from "typeorm";
import { inTransaction } from "../platform/database.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { MeterRef } from "./meter-counters.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import { refOfAsset } from "./usage-lookup.js";

const ASSETS_PER_TICK = 500;

/**
 * Makes the looks again at usage statuses that writes asked for and whose instance stopped before making them
 * (see UsageStatusEvents): a crossing completed by a write in flight is reported at the next tick after.
 */
export function statusRecheckJob(deps: UsageDependencies): ScheduledJob {
  return {
    name: "usage-status-recheck",
    async run(now) {
      for (const due of await deps.store.dueRechecks(now, ASSETS_PER_TICK)) {
        await recheck(deps, due.assetId, due.periodStart ?? now, now);
      }
    },
  };
}

/** Looks again at the asset's status in the period holding `periodStart`. */
async function recheck(deps: UsageDependencies, assetId: string, periodStart: Date, now: Date): Promise<void> {
  const ref = await refOfAsset(deps, assetId, periodStart);
  if (!ref) {
    await inTransaction(deps.dataSource, (manager) => deps.store.clearRecheck(manager, assetId, now));
    return;
  }
  const remember = await inTransaction(deps.dataSource, async (manager) => {
    const limitMicro = await creditsOf(deps, manager, ref);
    return deps.statusEvents.record(manager, [{ ref, valueMicro: 0, limitMicro, generation: -1, recheck: true }]);
  });
  remember();
}

/** A balance's credits in its current period (null: unlimited, or a metered asset). */
async function creditsOf(deps: UsageDependencies, manager: EntityManager, ref: MeterRef): Promise<number | null> {
  if (!ref.balance || ref.initialCreditsMicro === null) return null;
  return (await deps.store.periodCredits(manager, ref.assetId, ref.periodStart)) ?? ref.initialCreditsMicro;
}
