import { inTransaction } from "../platform/database.js";
import { DomainError } from "../platform/errors.js";
import { nextFireAfter } from "./cron-schedule.js";
import type { MeterRef } from "./meter-counters.js";
import { fromMicro, MAX_EXACT_TOTAL_MICRO } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import { BalancePeriodMoved } from "./usage-balance-store.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import type { EntitlementUsage } from "./usage-directory.js";

const MAX_ATTEMPTS = 5;

/**
 * Adds credits to a balance's current period. The period row is locked and takes a new generation (amounts
 * reserved against the old total and not yet written are reserved again), the status is evaluated again (a
 * top-up may lower it: its event goes out in the same transaction), and the counter is loaded as it now stands.
 */
export async function addCredits(
  deps: UsageDependencies,
  usage: EntitlementUsage,
  asset: UsageAsset,
  amountMicro: number,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const now = deps.clock.now();
    const ref = (await deps.counters.refOf(usage, asset, now)) as MeterRef;
    let remember = () => {};
    let counter: { generation: number; used: number; total: number };
    try {
      counter = await inTransaction(deps.dataSource, async (manager) => {
        // The balance row first, as the auto-balance locks it: the two never wait on each other in a circle.
        const balance = await deps.balances.find(manager, asset.id, true);
        if (balance) await deps.balances.checkPeriod(manager, asset.id, ref.periodStart);
        const period = await deps.store.lockPeriod(manager, ref, now);
        const generation = period.generation + 1;
        const total = (period.creditTotal ?? 0) + amountMicro;
        if (total > MAX_EXACT_TOTAL_MICRO) throw balanceTooLarge(asset, period.creditTotal ?? 0);
        await deps.store.setPeriodCredits(manager, ref, generation, total);
        await deps.balances.deposited(manager, asset.id, now);
        const used = await deps.store.recordedTotal(manager, asset.id, ref.periodStart, false);
        remember = await deps.statusEvents.record(manager, [
          { ref, valueMicro: used, limitMicro: total, generation, allowDecrease: true },
        ]);
        return { generation, used, total };
      });
    } catch (error) {
      if (!(error instanceof BalancePeriodMoved) || attempt >= MAX_ATTEMPTS) throw error;
      deps.counters.balanceMoved(asset.id);
      continue;
    }
    // Committed: nothing may fail the call now (a retry would add the credits twice). A counter not loaded now
    // is rebuilt when next used (its generation is gone), never re-added.
    remember();
    await deps.counters.meters.load(ref.key, counter.generation, counter.used, counter.total).catch((error: Error) => {
      deps.logger.warn({ err: { message: error.message } }, "could not load a topped-up credit counter");
    });
    return;
  }
}

function balanceTooLarge(asset: UsageAsset, creditsMicro: number): DomainError {
  return new DomainError(
    "failed-precondition",
    `${asset.metricName} holds ${fromMicro(creditsMicro)} credits: with this amount it would hold more than ` +
      `${fromMicro(MAX_EXACT_TOTAL_MICRO)}, the most a balance keeps exactly; nothing was added`,
    { slug: "balance-too-large" },
  );
}

/**
 * An automatic top-up, due by the balance's cron schedule: a new balance period starts with
 * `autoBalanceCreditAmount` credits plus, when `shouldAutoBalanceTransferCurrentCredits`, what was left (at most
 * `maxAutoBalanceCreditTransferAmount` when that is set). The old period's generation moves on, so an amount
 * reserved there and not yet written is reserved again in the new period. Answers whether it topped up.
 */
export async function autoBalance(deps: UsageDependencies, assetId: string, entitlementId: string): Promise<boolean> {
  const usage = await deps.directory.of(entitlementId);
  const asset = usage?.assets.find((candidate) => candidate.id === assetId);
  let remember = () => {};
  const done = await inTransaction(deps.dataSource, async (manager) => {
    const balance = await deps.balances.find(manager, assetId, true);
    const now = deps.clock.now();
    if (!balance?.nextAutoBalanceAt || balance.nextAutoBalanceAt > now) return false;
    const rules = asset?.balance?.autoBalance;
    if (!usage || !asset || !rules || asset.balance?.unlimited) {
      await deps.balances.setNextAutoBalance(manager, assetId, null);
      return false;
    }
    const current = deps.counters.refAt(usage, asset, balance.periodStart) as MeterRef;
    const old = await deps.store.lockPeriod(manager, current, now);
    await deps.store.setPeriodCredits(manager, current, old.generation + 1, old.creditTotal);
    const used = await deps.store.recordedTotal(manager, assetId, balance.periodStart, false);
    const left = Math.max(0, (old.creditTotal ?? 0) - used);
    const carried = rules.transferCurrentCredits ? Math.min(left, rules.maxTransferMicro ?? left) : 0;
    const total = Math.min(rules.creditAmountMicro + carried, MAX_EXACT_TOTAL_MICRO);
    const start = balance.nextAutoBalanceAt;
    const next = deps.counters.refAt(usage, asset, start, total) as MeterRef;
    await deps.store.lockPeriod(manager, next, now);
    await deps.balances.startPeriod(manager, assetId, start, now, nextFireAfter(rules.cron, now));
    remember = await deps.statusEvents.record(manager, [
      { ref: next, valueMicro: 0, limitMicro: total, generation: -1, allowDecrease: true },
    ]);
    return true;
  });
  remember();
  if (done) deps.counters.balanceMoved(assetId);
  return done;
}
