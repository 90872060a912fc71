import { inTransaction } from "../platform/database.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { UsageDependencies } from "./usage-dependencies.js";

const ASSETS_PER_TICK = 500;

/**
 * Reports the way back down when a metered asset's consumption period ends above Normal: the new period's
 * severity (usually Normal) goes out at the first tick after the period starts, without waiting for the next
 * use. An asset used meanwhile has reported it already, and the event is not sent twice.
 */
export function periodRolloverJob(deps: UsageDependencies): ScheduledJob {
  return {
    name: "usage-period-rollover",
    async run(now) {
      for (const raised of await deps.store.raisedMeteredStatuses(ASSETS_PER_TICK)) {
        const usage = await deps.directory.of(raised.entitlementId);
        const asset = usage?.assets.find((candidate) => candidate.id === raised.assetId);
        if (!usage || !asset?.metered) continue;
        const ref = await deps.counters.refOf(usage, asset, now);
        if (!ref || ref.periodStart <= raised.periodStart) continue;
        const remember = await inTransaction(deps.dataSource, async (manager) => {
          const value = await deps.store.recordedTotal(manager, asset.id, ref.periodStart, ref.peak);
          return deps.statusEvents.record(manager, [{ ref, valueMicro: value, limitMicro: null, generation: -1 }]);
        });
        remember();
      }
    },
  };
}
