import type { ScheduledJob } from "../platform/scheduler.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** How often the counters in use are counted again from the records. */
export const RECOUNT_INTERVAL_MS = 3_600_000;
const COUNTERS_PER_RUN = 1000;

/**
 * Counts the counters of current periods again from the records, once an hour: an amount reserved by an
 * instance that died before writing it (or by Redis after its caller gave up) stays counted, though never
 * written, until its counter is rebuilt; this bounds how long. A counter not in the coordinator is left alone:
 * its next use rebuilds it anyway.
 */
export function counterRecountJob(deps: UsageDependencies): ScheduledJob {
  let lastRunMs = Number.NEGATIVE_INFINITY;
  let afterAssetId = "";
  return {
    name: "usage-counter-recount",
    async run(now) {
      if (now.getTime() - lastRunMs < RECOUNT_INTERVAL_MS) return;
      lastRunMs = now.getTime();
      const currents = await deps.store.currentPeriods(now, afterAssetId, COUNTERS_PER_RUN);
      // More than a run's worth: the next run goes on after the last one counted, then starts over.
      afterAssetId = currents.length === COUNTERS_PER_RUN ? currents[currents.length - 1].assetId : "";
      for (const current of currents) {
        const usage = await deps.directory.of(current.entitlementId);
        const asset = usage?.assets.find((candidate) => candidate.id === current.assetId);
        if (!usage || !asset) continue;
        const ref = asset.balance
          ? deps.counters.refAt(usage, asset, current.periodStart)
          : await deps.counters.refOf(usage, asset, current.periodStart);
        if (!ref || (await deps.counters.meters.generationOf(ref.key)) === null) continue;
        await deps.counters.rebuild(ref);
      }
    },
  };
}
