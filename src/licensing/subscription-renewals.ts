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
/** Renewals announced per entitlement and round, the latest ones. */
const MAX_RENEWALS = 50;

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
          const announced = await lastRenewals(dataSource, rows);
          for (const row of rows) await renew(deps, row, now, announced.get(row.id));
        },
        deps.pageSize,
      );
    },
  };
}

/** The latest renewal announced of each of these entitlements: earlier ones need no second look. */
async function lastRenewals(dataSource: DataSource, of: EntitlementRow[]): Promise<Map<string, Date>> {
  const column = dataSource.getMetadata(EntitlementEntity).columns.find((c) => c.propertyName === "updatedAt");
  const rows = (await readSerially(dataSource, () =>
    dataSource.query(
      `SELECT entitlement_id, MAX(due_at) AS last FROM entitlement_notices WHERE kind = 'renewed' AND entitlement_id IN (${placeholders(of.length)}) GROUP BY entitlement_id`,
      of.map((row) => row.id),
    ),
  )) as { entitlement_id: string; last: unknown }[];
  return new Map(
    rows.map((row) => [row.entitlement_id, dataSource.driver.prepareHydratedValue(row.last, column as never) as Date]),
  );
}

async function renew(
  deps: RenewalDependencies,
  candidate: EntitlementRow,
  now: Date,
  announced: Date | undefined,
): Promise<void> {
  if (!dueWork(candidate, now, announced)) return;
  const entitlements = new SqlTable(deps.dataSource, EntitlementEntity);
  const locking = forUpdate(dialectOf(deps.dataSource));
  const events = deps.events.writes();
  const changed = await inTransaction(deps.dataSource, async (manager) => {
    // Locked and read again: a vendor's change of the policy meanwhile is kept.
    const [row] = await entitlements.select(manager, `id = ?${locking}`, [candidate.id]);
    const work = row && dueWork(row, now, announced);
    if (!work) return false;
    for (const renewal of work.renewals) {
      if (!(await mark(manager, row.id, "renewed", renewal.at, now))) continue;
      const next = renewalsAfter(work.subscription, renewal.at);
      await events.append(manager, [renewedEvent(row, renewal, next, now)]);
    }
    if (!work.endsAt || !(await mark(manager, row.id, "subscription-ended", work.endsAt, now))) return false;
    work.subscription.isSubscriptionActive = false;
    await manager.query(
      "UPDATE entitlements SET activation_policy = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
      [policyText(work.policy), date(deps.dataSource, now), row.id],
    );
    await events.append(manager, [cancelledEvent(row, now)]);
    return true;
  });
  events.committed();
  if (changed) await deps.entitlementChanged(candidate.id);
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
  const column = dataSource.getMetadata(EntitlementEntity).columns.find((c) => c.propertyName === "updatedAt");
  return dataSource.driver.preparePersistentValue(value, column as never);
}

function bool(dataSource: DataSource, value: boolean): unknown {
  return dataSource.options.type === "mysql" ? value : value ? 1 : 0;
}
