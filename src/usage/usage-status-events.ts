import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DataSource, EntityManager } from "typeorm";
import type { CreditBalanceStatus, OverageSeverity } from "../../gen/provision/v1/catalog_pb.js";
import {
  CreditBalanceStatusChangedDataSchema,
  MeteredUsageOverageStatusChangedDataSchema,
} from "../../gen/provision/v1/webhook_events_pb.js";
import type { Clock } from "../platform/clock.js";
import { inTransaction } from "../platform/database.js";
import type { Logger } from "../platform/logger.js";
import type { EventDraft, Outbox } from "../webhooks/outbox.js";
import type { MeterRef } from "./meter-counters.js";
import { fromMicro } from "./usage-amounts.js";
import type { StoredStatus, UsageStore } from "./usage-store.js";
import { balanceStatusOf, severityAt, severityOfBalance, tierAt } from "./usage-tiers.js";

/**
 * A counter after a write: its value as the coordinator answered it (other requests' reservations in flight
 * included), its generation (-1: unknown), and whether the write may lower the status within the period (a top-up).
 */
export interface StatusObservation {
  ref: MeterRef;
  valueMicro: number;
  limitMicro: number | null;
  generation: number;
  allowDecrease?: boolean;
  /** A look again at the asset (its write's hint gone): clears the look-again it was asked for. */
  recheck?: boolean;
  /**
   * Usage dated into a period that had ended when it arrived, or (a client's clock running ahead) into one not
   * started yet: it changes no status (the status followed is the current period's). Usage dated while its period
   * ran counts even when its write gets here after the end.
   */
  backDated?: boolean;
}

interface KnownStatus {
  periodStartMs: number;
  status: number;
  generation: number;
}

/** Normal, as OverageSeverity and CreditBalanceStatus both number it. */
const NORMAL = 1;

/** How long after a write a crossing that writes still in flight may complete is looked at again. */
const RECHECK_AFTER_MS = 1000;

/**
 * MeteredUsage.OverageStatusChanged and CreditBalance.StatusChanged, once per crossing: each asset's last
 * reported status is a locked row, changed (and the event written) in the transaction whose write crossed, as
 * the committed records and the transaction's own say, never as amounts merely reserved say.
 *
 * Within a period a status only rises (consumption only grows) unless a top-up lowers it; a new period starts
 * from whatever its first write (or the roll-over job) finds. Each instance remembers the statuses it saw with
 * the counter's generation (a top-up or rebuild takes a new one), so a write that cannot change the status
 * touches no row. A write whose reservation suggests a crossing that the committed records do not show yet
 * (another write in flight completes it) has the asset looked at again a second later, in a transaction of its
 * own: the crossing is reported once the write completing it has committed. The look-again is also stored with
 * the status, so that the scheduler makes it (status-recheck-job.ts) if this instance stops first.
 */
export class UsageStatusEvents {
  private readonly known = new Map<string, KnownStatus>();
  private readonly rechecks = new Map<string, StatusObservation>();
  private recheckTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: UsageStore,
    private readonly outbox: Outbox,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Whether `record` would read or write anything for these observations (a status may have changed). */
  mayRecord(observations: StatusObservation[]): boolean {
    return latestPerAsset(observations).some((observation) => this.mayChange(observation, statusOf(observation)));
  }

  /** Writes the events the observations call for; answers what to do once the transaction commits. */
  async record(manager: EntityManager, observations: StatusObservation[]): Promise<() => void> {
    const remembered: [string, KnownStatus][] = [];
    const drafts: EventDraft[] = [];
    const pending: StatusObservation[] = [];
    const now = this.clock.now();
    for (const observation of latestPerAsset(observations)) {
      const hinted = statusOf(observation);
      if (!this.mayChange(observation, hinted)) continue;
      const { ref } = observation;
      const stored = await this.store.lockStatus(
        manager,
        {
          assetId: ref.assetId,
          providerId: ref.providerId,
          periodStart: ref.periodStart,
          periodEnd: ref.periodEnd,
          normal: NORMAL,
        },
        now,
      );
      const committed = {
        ...observation,
        valueMicro: await this.store.recordedTotal(manager, ref.assetId, ref.periodStart, ref.peak),
      };
      const status = statusOf(committed);
      if (hinted > status && !observation.allowDecrease) {
        pending.push(observation);
        await this.store.markRecheck(manager, ref.assetId, new Date(now.getTime() + RECHECK_AFTER_MS), ref.periodStart);
      } else if (observation.recheck) await this.store.clearRecheck(manager, ref.assetId, now);
      const next = nextStatus(stored, committed, status);
      const kept = next ?? stored;
      remembered.push([
        ref.assetId,
        { ...kept, periodStartMs: kept.periodStart.getTime(), generation: observation.generation },
      ]);
      if (!next) continue;
      await this.store.saveStatus(manager, ref.assetId, next, now);
      drafts.push(...eventsOf(stored, next, committed, now));
    }
    const events = this.outbox.writes();
    if (drafts.length > 0) await events.append(manager, drafts);
    return () => {
      for (const [assetId, known] of remembered) this.known.set(assetId, known);
      for (const observation of pending) this.recheckLater(observation);
      events.committed();
    };
  }

  /** Stops the pending look-agains (the instance is closing; a crossing they would report waits for a write). */
  close(): void {
    clearTimeout(this.recheckTimer);
    this.rechecks.clear();
  }

  /** Whether the observation could change what this instance last saw stored. */
  private mayChange(observation: StatusObservation, status: number): boolean {
    const known = this.known.get(observation.ref.assetId);
    if (observation.recheck || !known || observation.generation !== known.generation) return true;
    const periodStartMs = observation.ref.periodStart.getTime();
    if (periodStartMs < known.periodStartMs) return false;
    if (periodStartMs > known.periodStartMs) return true;
    return status > known.status || (observation.allowDecrease === true && status < known.status);
  }

  private recheckLater(observation: StatusObservation): void {
    // Looked at again as the records then stand: no hint of its own, and never rescheduled.
    this.rechecks.set(observation.ref.assetId, { ...observation, valueMicro: 0, generation: -1, recheck: true });
    this.recheckTimer ??= setTimeout(() => void this.recheckAll(), RECHECK_AFTER_MS).unref();
  }

  private async recheckAll(): Promise<void> {
    this.recheckTimer = undefined;
    const due = [...this.rechecks.values()];
    this.rechecks.clear();
    for (const observation of due) {
      try {
        const remember = await inTransaction(this.dataSource, (manager) => this.record(manager, [observation]));
        remember();
      } catch (error) {
        this.logger.warn({ err: { message: (error as Error).message } }, "could not look at a usage status again");
      }
    }
  }
}

/**
 * The events of a change from `stored` to `next`: none when the status stays; when a metered asset's new period
 * starts above Normal after one that ended above it, its way back to Normal (dated the period's start, with
 * nothing consumed), then the rise, as the roll-over job and the write after it would have told them. (A credit balance
 * carries its credits into a new period: its status goes straight from one to the other.)
 */
function eventsOf(stored: StoredStatus, next: StoredStatus, observation: StatusObservation, now: Date): EventDraft[] {
  if (next.status === stored.status && next.periodStart.getTime() === stored.periodStart.getTime()) return [];
  const newPeriod = observation.ref.asset.metered && next.periodStart.getTime() > stored.periodStart.getTime();
  if (!newPeriod || stored.status === NORMAL || next.status === NORMAL) {
    return next.status === stored.status ? [] : [eventOf(observation, stored.status, next.status, now)];
  }
  return [
    eventOf({ ...observation, valueMicro: 0 }, stored.status, NORMAL, next.periodStart),
    eventOf(observation, NORMAL, next.status, now),
  ];
}

/** What to store after the observation, or undefined to leave the stored status as it is. */
function nextStatus(stored: StoredStatus, observation: StatusObservation, status: number): StoredStatus | undefined {
  const { periodStart, periodEnd } = observation.ref;
  const storedMs = stored.periodStart.getTime();
  if (periodStart.getTime() < storedMs) return undefined;
  if (periodStart.getTime() > storedMs) return { periodStart, periodEnd, status };
  const rises = status > stored.status;
  const falls = observation.allowDecrease === true && status < stored.status;
  return rises || falls ? { periodStart, periodEnd, status } : undefined;
}

/**
 * Per asset, the observation of its latest period with the highest value (the last write's for a top-up), among
 * those of the current period (the back-dated and the early ones change no status).
 */
function latestPerAsset(observations: StatusObservation[]): StatusObservation[] {
  const chosen = new Map<string, StatusObservation>();
  const ofCurrentPeriods = observations.filter((observation) => !observation.backDated);
  const byAsset = ofCurrentPeriods.sort((a, b) => a.ref.assetId.localeCompare(b.ref.assetId));
  for (const observation of byAsset) {
    const current = chosen.get(observation.ref.assetId);
    const later = !current || observation.ref.periodStart > current.ref.periodStart;
    const same = current && observation.ref.periodStart.getTime() === current.ref.periodStart.getTime();
    if (later || (same && (observation.allowDecrease || observation.valueMicro >= (current?.valueMicro ?? 0)))) {
      chosen.set(observation.ref.assetId, observation);
    }
  }
  return [...chosen.values()];
}

/** The OverageSeverity (metered) or CreditBalanceStatus (balance) a counter's value stands at. */
export function statusOf(observation: StatusObservation): number {
  const { asset } = observation.ref;
  if (asset.metered) return severityAt(asset.metered.tiers, observation.valueMicro);
  if (asset.balance) {
    const limit = asset.balance.unlimited ? null : observation.limitMicro;
    return balanceStatusOf(asset.balance.quotas, observation.valueMicro, limit).status;
  }
  return NORMAL;
}

function eventOf(observation: StatusObservation, previous: number, status: number, now: Date): EventDraft {
  const { ref, valueMicro } = observation;
  const { asset, usage } = ref;
  const common = {
    providerId: ref.providerId,
    entityKind: "monitored-asset",
    entityId: asset.id,
    subject: `entitlements/${usage.entitlementId}/assets/${asset.id}`,
    eventVersion: 1,
    time: now,
  };
  const identity = {
    assetId: asset.id,
    entitlementId: usage.entitlementId,
    productId: asset.productId,
    metricName: asset.metricName,
    customerId: usage.customerId,
  };
  if (asset.balance) {
    const total = asset.balance.unlimited ? null : observation.limitMicro;
    return {
      ...common,
      type: "CreditBalance.StatusChanged",
      dataSchema: CreditBalanceStatusChangedDataSchema,
      data: create(CreditBalanceStatusChangedDataSchema, {
        ...identity,
        previousStatus: previous as CreditBalanceStatus,
        status: status as CreditBalanceStatus,
        severity: severityOfBalance(status as CreditBalanceStatus),
        creditsUsed: fromMicro(valueMicro),
        totalCredits: total === null ? 0 : fromMicro(total),
        creditsLeft: total === null ? 0 : fromMicro(Math.max(0, total - valueMicro)),
        isUnlimitedCredits: total === null,
        changedAt: timestampFromDate(now),
      }),
    };
  }
  return {
    ...common,
    type: "MeteredUsage.OverageStatusChanged",
    dataSchema: MeteredUsageOverageStatusChangedDataSchema,
    data: create(MeteredUsageOverageStatusChangedDataSchema, {
      ...identity,
      periodStart: timestampFromDate(ref.periodStart),
      periodEnd: ref.periodEnd ? timestampFromDate(ref.periodEnd) : undefined,
      previousSeverity: previous as OverageSeverity,
      severity: status as OverageSeverity,
      tier: asset.metered ? (tierAt(asset.metered.tiers, valueMicro)?.name ?? "") : "",
      consumption: fromMicro(valueMicro),
      changedAt: timestampFromDate(now),
    }),
  };
}
