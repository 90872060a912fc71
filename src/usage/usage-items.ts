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
  transactionId: number;
  asset: UsageAsset;
  amountMicro: number;
  occurredAt: Date;
  ref: MeterRef | undefined;
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
  const seen = new Set<number>();
  for (const [index, event] of events.entries()) {
    const problems = itemProblems(usage, sessionId, event, now, seen);
    for (const [field, message] of problems) violations.push({ field: `events[${index}].${field}`, message });
    if (problems.length > 0) continue;
    const asset = usage.byMetric.get(event.eventName) as UsageAsset;
    const occurredAt = event.creationDateTime ? (storableDate(event.creationDateTime) as Date) : now;
    items.push({
      transactionId: Number(event.transactionId),
      asset,
      amountMicro: (parseUsageAmount(event.eventData) as { micro: number }).micro,
      occurredAt,
      ref: await counters.refOf(usage, asset, occurredAt),
    });
  }
  if (violations.length > 0) {
    throw invalidArgument(
      `${violations.length} item(s) of the batch are invalid; nothing was recorded`,
      violations.slice(0, MAX_REPORTED),
    );
  }
  return items;
}

function itemProblems(
  usage: EntitlementUsage,
  sessionId: string,
  event: SessionEvent,
  now: Date,
  seen: Set<number>,
): [string, string][] {
  const problems: [string, string][] = [];
  const id = event.transactionId;
  if (id <= 0n || id > BigInt(Number.MAX_SAFE_INTEGER)) {
    problems.push([
      "transactionId",
      "must be a positive integer (up to 2^53 - 1): usage is counted once per transactionId",
    ]);
  } else if (seen.has(Number(id))) {
    problems.push(["transactionId", "appears twice in the batch"]);
  } else {
    seen.add(Number(id));
  }
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
  if (dated && asset) {
    const at = dated.getTime();
    if (at > now.getTime() + MAX_FUTURE_SKEW_MS) {
      problems.push(["creationDateTime", "is more than 5 minutes in the future"]);
    } else if (at < now.getTime() - asset.backDatingToleranceMs) {
      problems.push([
        "creationDateTime",
        `is older than the asset's allowedBackDatingTolerance (${asset.backDatingToleranceMs / 1000} s)`,
      ]);
    }
  }
  return problems;
}
