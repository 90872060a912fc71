import type { Clock } from "../platform/clock.js";
import type { MeterKey, MeterMode, ReserveOutcome, UsageMeters } from "../platform/usage-meters.js";
import { periodOf } from "./consumption-periods.js";
import { nextFireAfter } from "./cron-schedule.js";
import { countersUnavailable } from "./guarded-meters.js";
import { MAX_EXACT_TOTAL_MICRO } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import { BalancePeriodMoved } from "./usage-balance-store.js";
import type { EntitlementUsage } from "./usage-directory.js";
import type { PeriodRef, UsageStore } from "./usage-store.js";

/** A counter as metering uses it: its period row, its key in the coordinator and how it counts. */
export interface MeterRef extends PeriodRef {
  asset: UsageAsset;
  usage: EntitlementUsage;
  key: MeterKey;
  mode: MeterMode;
  cap: number | "stored" | undefined;
}

export type Reserved = Extract<ReserveOutcome, { kind: "reserved" }>;
export type Refused = Extract<ReserveOutcome, { kind: "refused" }>;

/** How long to wait, in turn, for another instance's rebuild to load a counter before rebuilding it here. */
const GENERATION_WAITS_MS = [2, 5, 10, 20, 40];

/** Rebuilds in a row that still leave a counter missing mean the coordinator is losing what it is given. */
const MAX_REBUILDS = 5;

/** Counters kept in the coordinator, rebuilt from the database's records whenever one is missing. */
export class MeterCounters {
  /** Each credit balance's current period start (ms), as this instance last saw it. */
  private readonly balanceStarts = new Map<string, number>();
  private readonly rebuilds = new Map<string, Promise<void>>();
  /** Each metered asset's counter of the period last asked for: a batch's items share one. */
  private readonly meteredRefs = new WeakMap<UsageAsset, MeterRef>();

  constructor(
    readonly store: UsageStore,
    readonly meters: UsageMeters,
    private readonly clock: Clock,
  ) {}

  /** The counter usage dated `at` counts in; undefined for an informational asset (no usage model). */
  async refOf(usage: EntitlementUsage, asset: UsageAsset, at: Date): Promise<MeterRef | undefined> {
    if (asset.metered) {
      const period = periodOf(asset.metered.period, at);
      const kept = this.meteredRefs.get(asset);
      if (kept?.periodStart.getTime() === period.start.getTime() && kept.usage === usage) return kept;
      const ref: MeterRef = {
        ...owners(usage, asset),
        periodStart: period.start,
        periodEnd: period.end,
        initialCreditsMicro: null,
        peak: asset.metered.mode === "peak",
        balance: false,
        key: { assetId: asset.id, periodStartMs: period.start.getTime() },
        mode: asset.metered.mode,
        cap: asset.metered.blockCapMicro ?? MAX_EXACT_TOTAL_MICRO,
      };
      this.meteredRefs.set(asset, ref);
      return ref;
    }
    if (asset.balance) return this.refAt(usage, asset, await this.balanceStart(usage, asset));
    return undefined;
  }

  /** A credit balance's counter of the period starting at `start` (with `credits` for a new period row). */
  refAt(usage: EntitlementUsage, asset: UsageAsset, start: Date, credits?: number): MeterRef | undefined {
    if (asset.balance) {
      const initial = credits ?? asset.balance.initialCreditsMicro;
      return {
        ...owners(usage, asset),
        periodStart: start,
        periodEnd: null,
        initialCreditsMicro: asset.balance.unlimited ? null : initial,
        peak: false,
        balance: true,
        key: { assetId: asset.id, periodStartMs: start.getTime() },
        mode: "sum",
        cap: asset.balance.unlimited ? MAX_EXACT_TOTAL_MICRO : "stored",
      };
    }
    return undefined;
  }

  /** Forgets a balance's period: the next lookup reads it from the database. */
  balanceMoved(assetId: string): void {
    this.balanceStarts.delete(assetId);
  }

  /**
   * A refusal from a credit balance's counter stands only while the balance is still in the counter's period:
   * another instance's automatic top-up may have moved it on (only those move it). Throws BalancePeriodMoved then.
   */
  async confirmRefusal(ref: MeterRef): Promise<void> {
    if (!ref.asset.balance?.autoBalance) return;
    const current = await this.store.balances.currentPeriodStart(ref.assetId);
    if (current && current.getTime() !== ref.periodStart.getTime()) throw new BalancePeriodMoved(current);
  }

  /**
   * Reserves `amount` in the counter, rebuilding it first when missing. Throws BalancePeriodMoved when the
   * balance has moved on to a new period (look the counter up again).
   */
  async reserve(ref: MeterRef, amount: number): Promise<Reserved | Refused> {
    for (let rebuilds = 0; rebuilds <= MAX_REBUILDS; rebuilds++) {
      const outcome = await this.meters.reserve({ key: ref.key, amount, mode: ref.mode, cap: ref.cap });
      if (outcome.kind !== "missing") return outcome;
      await this.rebuild(ref);
    }
    throw countersUnavailable("they keep being lost");
  }

  /**
   * Rebuilds the counter from the records under a new generation and loads it into the coordinator. Callers on
   * this instance that ask at once share one rebuild.
   */
  async rebuild(ref: MeterRef): Promise<void> {
    const name = `${ref.key.assetId}:${ref.key.periodStartMs}`;
    let running = this.rebuilds.get(name);
    if (!running) {
      running = this.rebuildNow(ref).finally(() => this.rebuilds.delete(name));
      this.rebuilds.set(name, running);
    }
    return running;
  }

  /**
   * Makes sure the counter is of `generation` (the database's; -1: none yet): another instance's rebuild that took it may be
   * loading it right now, so wait a little for that before rebuilding here (each rebuild makes every amount
   * reserved in the counter before it reserve again).
   */
  async awaitGeneration(ref: MeterRef, generation: number): Promise<void> {
    for (const waitMs of generation < 0 ? [] : GENERATION_WAITS_MS) {
      const current = await this.meters.generationOf(ref.key);
      if (current !== null && current >= generation) return;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
    await this.rebuild(ref);
  }

  private async rebuildNow(ref: MeterRef): Promise<void> {
    const rebuilt = await this.store.rebuild(ref, this.clock.now());
    await this.meters.load(ref.key, rebuilt.generation, rebuilt.valueMicro, rebuilt.limitMicro);
  }

  private async balanceStart(usage: EntitlementUsage, asset: UsageAsset): Promise<Date> {
    const known = this.balanceStarts.get(asset.id);
    if (known !== undefined) return new Date(known);
    const now = this.clock.now();
    const cron = asset.balance?.autoBalance?.cron;
    const start = await this.store.balances.periodStartOrBegin(
      { assetId: asset.id, providerId: usage.providerId, entitlementId: usage.entitlementId },
      now,
      cron ? nextFireAfter(cron, now) : null,
    );
    this.balanceStarts.set(asset.id, start.getTime());
    return start;
  }
}

function owners(usage: EntitlementUsage, asset: UsageAsset) {
  return { asset, usage, assetId: asset.id, providerId: usage.providerId, entitlementId: usage.entitlementId };
}
