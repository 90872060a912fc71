import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DataSource, EntityManager } from "typeorm";
import {
  EntitlementCancelledDataSchema,
  EntitlementRenewedDataSchema,
} from "../../gen/provision/v1/webhook_events_pb.js";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import { dialectOf, forUpdate, inTransaction, readSerially } from "../platform/database.js";
import { scanInPages } from "../platform/paged-scan.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { EventDraft, Outbox } from "../webhooks/outbox.js";
import { EntitlementEntity, type EntitlementRow } from "./entities.js";
import { entitlementData, entitlementEvent } from "./entitlement-events.js";
import { policyOf, policyText } from "./entitlement-mapper.js";
import { effectiveSubscription, renewalsBetween } from "./subscription-periods.js";

/** How far back a renewal is still announced (a scheduler that was down catches up this far). */
const CATCH_UP_MS = 30 * 86_400_000;
/** Renewals announced per entitlement and transaction, the earliest not yet announced. */
const MAX_RENEWALS = 50;
const MAX_RENEWALS_PER_ROUND = 1000;
/**
 * Marks the instant an inactive subscription was set active again: renewals that fell while it was inactive
 * are not announced (nothing renewed then).
 */
const RESUMED = "subscription-resumed";

export interface RenewalDependencies {
  dataSource: DataSource;
  events: Outbox;
  /** Tells every instance the entitlement changed (its subscription ended), once committed. */
  entitlementChanged: (entitlementId: string) => Promise<void>;
  /** Entitlements looked at per page of the scan (tests make it small). */
  pageSize?: number;
}

/**
 * Subscription renewals as they come due: Entitlement.Renewed once per renewal instant passed (the policy's
 * nextRenewalTimeStamp and periods left are already read as of now: renewals are counted from the stored
 * values, never rewritten, so month ends do not drift), and at the end of the last period (or
 * notValidAfterTimestamp) the subscription is set inactive and Entitlement.Cancelled is sent, once.
 */
export function subscriptionRenewalsJob(deps: RenewalDependencies): ScheduledJob {
  const entitlements = new SqlTable(deps.dataSource, EntitlementEntity);
  return {
    name: "subscription-renewals",
    async run(now) {
      const { dataSource } = deps;
      const page = (after: string, limit: number) =>
        readSerially(dataSource, () =>
          entitlements.select(
            dataSource.manager,
            "is_template = ? AND is_revoked = ? AND activation_policy LIKE ? AND id > ? ORDER BY id LIMIT ?",
            [bool(dataSource, false), bool(dataSource, false), "%subscriptionPolicy%", after, limit],
          ),
        );
      await scanInPages(
        page,
        async (rows) => {
          const announced = await announcedUpTo(dataSource, rows);
          for (const row of rows) await renewAll(deps, row, now, announced.get(row.id));
        },
        deps.pageSize,
      );
    },
  };
}

/**
 * Per entitlement, the instant up to which renewals need no look: the latest renewal announced, or when later,
 * the latest resumption of its subscription.
 */
async function announcedUpTo(dataSource: DataSource, of: EntitlementRow[]): Promise<Map<string, Date>> {
  const rows = (await readSerially(dataSource, () =>
    dataSource.query(
      `SELECT entitlement_id, MAX(due_at) AS last FROM entitlement_notices WHERE kind IN ('renewed', ?) AND entitlement_id IN (${placeholders(of.length)}) GROUP BY entitlement_id`,
      [RESUMED, ...of.map((row) => row.id)],
    ),
  )) as { entitlement_id: string; last: unknown }[];
  return new Map(rows.map((row) => [row.entitlement_id, hydrated(dataSource, row.last)]));
}

/**
 * Announces the renewals due, MAX_RENEWALS a transaction, the earliest first; at most MAX_RENEWALS_PER_ROUND
 * (a very short period after a long outage), the next round going on from the last announced.
 */
async function renewAll(deps: RenewalDependencies, candidate: EntitlementRow, now: Date, announced: Date | undefined) {
  let since = announced;
  for (let announcedThisRound = 0; announcedThisRound < MAX_RENEWALS_PER_ROUND; announcedThisRound += MAX_RENEWALS) {
    const more = await renew(deps, candidate, now, since);
    if (more === null) return;
    since = more;
  }
}

/** One transaction's renewals; answers the last announced when more may be due, else null. */
async function renew(
  deps: RenewalDependencies,
  candidate: EntitlementRow,
  now: Date,
  announced: Date | undefined,
): Promise<Date | null> {
  if (!dueWork(candidate, now, announced)) return null;
  const entitlements = new SqlTable(deps.dataSource, EntitlementEntity);
  const locking = forUpdate(dialectOf(deps.dataSource));
  const events = deps.events.writes();
  const outcome = await inTransaction(deps.dataSource, async (manager) => {
    // Locked and read again: a vendor's change of the policy meanwhile is kept.
    const [row] = await entitlements.select(manager, `id = ?${locking}`, [candidate.id]);
    const work = row && dueWork(row, now, await resumedAfter(manager, row.id, announced));
    if (!work) return { changed: false, more: null };
    let renewed = false;
    for (const renewal of work.renewals) {
      if (!(await mark(manager, row.id, "renewed", renewal.at, now))) continue;
      const next = renewalsAfter(work.subscription, renewal.at);
      await events.append(manager, [renewedEvent(row, renewal, next, now)]);
      renewed = true;
    }
    const more = work.renewals.length === MAX_RENEWALS ? (work.renewals.at(-1)?.at ?? null) : null;
    const ended = work.endsAt !== null && (await mark(manager, row.id, "subscription-ended", work.endsAt, now));
    if (ended) work.subscription.isSubscriptionActive = false;
    if (renewed || ended) await recordChange(manager, row.id, ended ? policyText(work.policy) : null, now);
    if (ended) await events.append(manager, [cancelledEvent(row, now)]);
    return { changed: renewed || ended, more };
  });
  events.committed();
  if (outcome.changed) await deps.entitlementChanged(candidate.id);
  return outcome.more;
}

/** `announced`, or the subscription's resumption when it was set active again since (read under the row's lock). */
async function resumedAfter(manager: EntityManager, entitlementId: string, announced: Date | undefined) {
  const [latest] = (await manager.query(
    "SELECT due_at FROM entitlement_notices WHERE entitlement_id = ? AND kind = ? ORDER BY due_at DESC LIMIT 1",
    [entitlementId, RESUMED],
  )) as { due_at: unknown }[];
  if (!latest) return announced;
  const resumed = hydrated(manager.connection, latest.due_at);
  return announced && announced > resumed ? announced : resumed;
}

/** A renewal is a change of the entitlement (its updatedAt); its end sets the policy inactive too. */
async function recordChange(manager: EntityManager, entitlementId: string, policy: string | null, now: Date) {
  const at = date(manager.connection, now);
  if (policy === null) {
    await manager.query("UPDATE entitlements SET updated_at = ? WHERE id = ? AND updated_at < ?", [
      at,
      entitlementId,
      at,
    ]);
    return;
  }
  await manager.query(
    "UPDATE entitlements SET activation_policy = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
    [policy, at, entitlementId],
  );
}

/**
 * Records, in the transaction that sets an inactive subscription active again, that renewals before `now`
 * are not to be announced.
 */
export async function markSubscriptionResumed(
  manager: EntityManager,
  before: EntitlementRow,
  after: EntitlementRow,
  now: Date,
): Promise<void> {
  const [old, current] = [policyOf(before)?.subscriptionPolicy, policyOf(after)?.subscriptionPolicy];
  if (old && !old.isSubscriptionActive && current?.isSubscriptionActive)
    await mark(manager, after.id, RESUMED, now, now);
}

/** The renewals passed and, when the subscription has just ended, its end; null when there is nothing to do. */
function dueWork(row: EntitlementRow, now: Date, announced: Date | undefined) {
  const policy = policyOf(row);
  const subscription = policy?.subscriptionPolicy;
  if (!policy || !subscription) return null;
  const floor = Math.max(row.createdAt.getTime(), now.getTime() - CATCH_UP_MS, announced?.getTime() ?? 0);
  const since = new Date(floor);
  // An inactive subscription does not renew: nothing is announced for it.
  const renewals = subscription.isSubscriptionActive ? renewalsBetween(subscription, since, now, MAX_RENEWALS) : [];
  const effective = effectiveSubscription(subscription, now);
  const ended = effective.endsAt !== null && effective.endsAt <= now && subscription.isSubscriptionActive;
  if (renewals.length === 0 && !ended) return null;
  return { policy, subscription, renewals, endsAt: ended ? effective.endsAt : null };
}

/** The renewal after `at` (null when none is left). */
function renewalsAfter(subscription: Parameters<typeof effectiveSubscription>[0], at: Date): Date | null {
  return effectiveSubscription(subscription, at).nextRenewalAt;
}

/** Records that this notice was sent; false when it had been (by this or another round). */
async function mark(manager: EntityManager, entitlementId: string, kind: string, dueAt: Date, now: Date) {
  const dataSource = manager.connection;
  const [found] = (await manager.query(
    "SELECT 1 AS present FROM entitlement_notices WHERE entitlement_id = ? AND kind = ? AND due_at = ?",
    [entitlementId, kind, date(dataSource, dueAt)],
  )) as unknown[];
  if (found) return false;
  await manager.query(
    "INSERT INTO entitlement_notices (entitlement_id, kind, due_at, created_at) VALUES (?, ?, ?, ?)",
    [entitlementId, kind, date(dataSource, dueAt), date(dataSource, now)],
  );
  return true;
}

function renewedEvent(
  row: EntitlementRow,
  renewal: { at: Date; periodsLeft: number },
  next: Date | null,
  now: Date,
): EventDraft {
  const data = create(EntitlementRenewedDataSchema, {
    ...entitlementData(row),
    renewedAt: timestampFromDate(renewal.at),
    nextRenewalAt: next ? timestampFromDate(next) : undefined,
    subscriptionPeriodsLeft: renewal.periodsLeft,
  });
  return entitlementEvent(row, "Entitlement.Renewed", now, EntitlementRenewedDataSchema, data);
}

function cancelledEvent(row: EntitlementRow, now: Date): EventDraft {
  const data = create(EntitlementCancelledDataSchema, {
    ...entitlementData(row),
    reason: "subscription-ended",
    cancelledAt: timestampFromDate(now),
  });
  return entitlementEvent(row, "Entitlement.Cancelled", now, EntitlementCancelledDataSchema, data);
}

function date(dataSource: DataSource, value: Date): unknown {
  return dataSource.driver.preparePersistentValue(value, updatedAtColumn(dataSource) as never);
}

function hydrated(dataSource: DataSource, value: unknown): Date {
  return dataSource.driver.prepareHydratedValue(value, updatedAtColumn(dataSource) as never) as Date;
}

function updatedAtColumn(dataSource: DataSource) {
  return dataSource.getMetadata(EntitlementEntity).columns.find((c) => c.propertyName === "updatedAt");
}

function bool(dataSource: DataSource, value: boolean): unknown {
  return dataSource.options.type === "mysql" ? value : value ? 1 : 0;
}
