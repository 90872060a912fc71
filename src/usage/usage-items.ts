import type { SessionEvent } from "../../gen/provision/v1/session_event_pb.js";
import { type FieldViolation, invalidArgument } from "../platform/errors.js";
import { storableDate } from "../platform/timestamps.js";
import type { MeterCounters, MeterRef } from "./meter-counters.js";
import { parseUsageAmount } from "./usage-amounts.js";
import type { UsageAsset } from "./usage-assets.js";
import type { EntitlementUsage } from "./usage-directory.js";

/** How far in the future an item may be dated (clocks differ). */
export const MAX_FUTURE_SKEW_MS = 5 * 60_000;
const MAX_REPORTED = 20;

/** A usage transaction, checked: its asset, amount, date and the counter it counts in (none: informational). */
export interface UsageItem {
  transactionId: bigint;
  asset: UsageAsset;
  amountMicro: number;
  occurredAt: Date;
  ref: MeterRef | undefined;
  /**
   * Dated before the asset's allowedBackDatingTolerance: refused unless it repeats a recorded transaction (a retry
   * of usage recorded while it was recent is a duplicate, not an error). Such an item has no counter.
   */
  tooOld?: FieldViolation;
}

/** The batch's items, each checked; a batch with any bad item is refused whole, naming every bad item. */
export async function usageItemsOf(
  counters: MeterCounters,
  usage: EntitlementUsage,
  sessionId: string,
  events: readonly SessionEvent[],
  now: Date,
): Promise<UsageItem[]> {
  const violations: FieldViolation[] = [];
  const items: UsageItem[] = [];
  const seen = new Set<bigint>();
  const refs = new BatchRefs(counters, usage);
  for (const [index, event] of events.entries()) {
    const checked = checkedItem(usage, sessionId, event, now, seen);
    if ("problems" in checked) {
      for (const [field, message] of checked.problems) violations.push({ field: `events[${index}].${field}`, message });
      continue;
    }
    const { asset, occurredAt } = checked;
    const item = { transactionId: event.transactionId, asset, amountMicro: checked.micro, occurredAt };
    if (checked.tooOld) {
      items.push({
        ...item,
        ref: undefined,
        tooOld: { field: `events[${index}].creationDateTime`, message: checked.tooOld },
      });
      continue;
    }
    items.push({ ...item, ref: refs.kept(asset, occurredAt) ?? (await refs.of(asset, occurredAt)) });
  }
  // Refused anyway: the items too old are named too, whether recorded or not (a resend of the batch mended tells).
  if (violations.length > 0) throw invalidItems([...violations, ...items.flatMap((item) => item.tooOld ?? [])]);
  return items;
}

/** The refusal of a batch naming its bad items' violations (the first MAX_REPORTED). */
export function invalidItems(violations: FieldViolation[]) {
  return invalidArgument(
    `${violations.length} item(s) of the batch are invalid; nothing was recorded`,
    violations.slice(0, MAX_REPORTED),
  );
}

/**
 * The counters of a batch's items: a metered asset's items dated the same instant (those sent without a date all
 * take the batch's `now`) share one, asked for once.
 */
class BatchRefs {
  private readonly byAsset = new Map<UsageAsset, { at: number; ref: MeterRef | undefined }>();

  constructor(
    private readonly counters: MeterCounters,
    private readonly usage: EntitlementUsage,
  ) {}

  kept(asset: UsageAsset, at: Date): MeterRef | undefined {
    const kept = this.byAsset.get(asset);
    return kept?.at === at.getTime() ? kept.ref : undefined;
  }

  async of(asset: UsageAsset, at: Date): Promise<MeterRef | undefined> {
    const ref = await this.counters.refOf(this.usage, asset, at);
    if (asset.metered) this.byAsset.set(asset, { at: at.getTime(), ref });
    return ref;
  }
}

type CheckedItem =
  | { asset: UsageAsset; micro: number; occurredAt: Date; tooOld: string | undefined }
  | { problems: [string, string][] };

/** An item's asset, amount and date, or every problem it has. */
function checkedItem(
  usage: EntitlementUsage,
  sessionId: string,
  event: SessionEvent,
  now: Date,
  seen: Set<bigint>,
): CheckedItem {
  const problems: [string, string][] = [];
  const id = event.transactionId;
  if (id <= 0n) {
    problems.push(["transactionId", "must be a positive integer: usage is counted once per transactionId"]);
  } else if (seen.has(id)) {
    problems.push(["transactionId", "appears twice in the batch"]);
  } else {
    seen.add(id);
  }
  if (event.apiVersion !== 0 && event.apiVersion !== 1) problems.push(["apiVersion", "must be 0 or 1"]);
  if (event.sessionId !== "" && event.sessionId.toLowerCase() !== sessionId.toLowerCase()) {
    problems.push(["sessionId", "must be empty or the session in the path"]);
  }
  const asset = usage.byMetric.get(event.eventName);
  if (!asset) {
    const known = [...usage.byMetric.keys()].join(", ") || "none";
    problems.push(["eventName", `must be the metricName of one of the entitlement's assets (${known})`]);
  }
  const amount = parseUsageAmount(event.eventData);
  if ("problem" in amount) problems.push(["eventData", amount.problem]);
  const dated = event.creationDateTime ? storableDate(event.creationDateTime) : now;
  if (!dated) problems.push(["creationDateTime", "must be an instant between 1970 and 9999"]);
  let tooOld: string | undefined;
  if (dated && asset) {
    const at = dated.getTime();
    if (at > now.getTime() + MAX_FUTURE_SKEW_MS) {
      problems.push(["creationDateTime", "is more than 5 minutes in the future"]);
    } else if (at < now.getTime() - asset.backDatingToleranceMs) {
      tooOld = `is older than the asset's allowedBackDatingTolerance (${asset.backDatingToleranceMs / 1000} s)`;
    }
  }
  if (problems.length > 0 || !asset || !dated || "problem" in amount) return { problems };
  return { asset, micro: amount.micro, occurredAt: dated, tooOld };
}
