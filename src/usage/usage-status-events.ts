import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { EntityManager } from "typeorm";
import type { CreditBalanceStatus, OverageSeverity } from "../../gen/provision/v1/catalog_pb.js";
import {
  CreditBalanceStatusChangedDataSchema,
  MeteredUsageOverageStatusChangedDataSchema,
} from "../../gen/provision/v1/webhook_events_pb.js";
import type { Clock } from "../platform/clock.js";
import type { EventDraft, Outbox } from "../webhooks/outbox.js";
import type { MeterRef } from "./meter-counters.js";
import { fromMicro } from "./usage-amounts.js";
import type { StoredStatus, UsageStore } from "./usage-store.js";
import { balanceStatusOf, severityAt, severityOfBalance, tierAt } from "./usage-tiers.js";

/** A counter's value after a write, and whether that write may lower the status within the period (a top-up). */
export interface StatusObservation {
  ref: MeterRef;
  valueMicro: number;
  limitMicro: number | null;
  allowDecrease?: boolean;
}

/** Normal, as OverageSeverity and CreditBalanceStatus both number it. */
const NORMAL = 1;

/**
 * MeteredUsage.OverageStatusChanged and CreditBalance.StatusChanged, once per crossing: each asset's last
 * reported status is a locked row, changed (and the event written) in the transaction whose write crossed.
 * Within a period a status only rises (consumption only grows) unless a top-up lowers it; a new period starts
 * from whatever its first write finds. Each instance remembers the statuses it saw, so a write that changes
 * nothing touches no row.
 */
export class UsageStatusEvents {
  private readonly known = new Map<string, { periodStartMs: number; status: number }>();

  constructor(
    private readonly store: UsageStore,
    private readonly outbox: Outbox,
    private readonly clock: Clock,
  ) {}

  /** Writes the events the observations call for; answers what to remember once the transaction commits. */
  async record(manager: EntityManager, observations: StatusObservation[]): Promise<() => void> {
    const remembered: [string, StoredStatus][] = [];
    const drafts: EventDraft[] = [];
    for (const observation of latestPerAsset(observations)) {
      const status = statusOf(observation);
      if (!this.mayChange(observation, status)) continue;
      const { ref } = observation;
      const now = this.clock.now();
      const stored = await this.store.lockStatus(
        manager,
        { assetId: ref.assetId, providerId: ref.providerId, periodStart: ref.periodStart, normal: NORMAL },
        now,
      );
      const next = nextStatus(stored, observation, status);
      remembered.push([ref.assetId, next ?? stored]);
      if (!next) continue;
      await this.store.saveStatus(manager, ref.assetId, next, now);
      if (next.status !== stored.status) drafts.push(eventOf(observation, stored.status, next.status, now));
    }
    if (drafts.length > 0) await this.outbox.append(manager, drafts);
    return () => {
      for (const [assetId, stored] of remembered) {
        this.known.set(assetId, { periodStartMs: stored.periodStart.getTime(), status: stored.status });
      }
      if (drafts.length > 0) this.outbox.committed();
    };
  }

  /** Whether the observation could change what this instance last saw stored. */
  private mayChange(observation: StatusObservation, status: number): boolean {
    const known = this.known.get(observation.ref.assetId);
    if (!known) return true;
    const periodStartMs = observation.ref.periodStart.getTime();
    if (periodStartMs < known.periodStartMs) return false;
    if (periodStartMs > known.periodStartMs) return true;
    return status > known.status || (observation.allowDecrease === true && status < known.status);
  }
}

/** What to store after the observation, or undefined to leave the stored status as it is. */
function nextStatus(stored: StoredStatus, observation: StatusObservation, status: number): StoredStatus | undefined {
  const periodStart = observation.ref.periodStart;
  const storedMs = stored.periodStart.getTime();
  if (periodStart.getTime() < storedMs) return undefined;
  if (periodStart.getTime() > storedMs) return { periodStart, status };
  const rises = status > stored.status;
  const falls = observation.allowDecrease === true && status < stored.status;
  return rises || falls ? { periodStart, status } : undefined;
}

/** Per asset, the observation of its latest period with the highest value (the last write's for a top-up). */
function latestPerAsset(observations: StatusObservation[]): StatusObservation[] {
  const chosen = new Map<string, StatusObservation>();
  for (const observation of observations) {
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
