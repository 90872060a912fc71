import { inTransaction } from "../platform/database.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import { refOfAsset } from "./usage-lookup.js";

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
      for (const raised of await deps.store.raisedEndedStatuses(now, ASSETS_PER_TICK)) {
        await rollOver(deps, raised.assetId, now);
      }
    },
  };
}

async function rollOver(deps: UsageDependencies, assetId: string, now: Date): Promise<void> {
  const ref = await refOfAsset(deps, assetId, now);
  if (!ref?.asset.metered) {
    await deps.store.clearStatus(assetId, now);
    return;
  }
  const remember = await inTransaction(deps.dataSource, async (manager) => {
    const value = await deps.store.recordedTotal(manager, assetId, ref.periodStart, ref.peak);
    return deps.statusEvents.record(manager, [{ ref, valueMicro: value, limitMicro: null, generation: -1 }]);
  });
  remember();
}
