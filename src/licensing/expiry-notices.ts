import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DataSource, EntityManager } from "typeorm";
import {
  EntitlementExpiringDataSchema,
  EntitlementTrialExpiringDataSchema,
} from "../../gen/provision/v1/webhook_events_pb.js";
import { SqlTable } from "../catalog/sql-table.js";
import { inTransaction, isUniqueViolation, readSerially } from "../platform/database.js";
import { SCAN_PAGE_SIZE, scanInPages } from "../platform/paged-scan.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { EventDraft, Outbox } from "../webhooks/outbox.js";
import { EntitlementEntity, type EntitlementRow } from "./entities.js";
import { entitlementData, entitlementEvent } from "./entitlement-events.js";
import { policyOf } from "./entitlement-mapper.js";
import { trialEnd } from "./license-ends.js";
import { dateOf } from "./policy-time.js";

/** Entitlements looked at per round; the rest wait for the next tick. */
const BATCH = 200;

export interface NoticeLeads {
  expiringMs: number;
  trialExpiringMs: number;
}

/**
 * Entitlement.Expiring when an entitlement's expiry, and Entitlement.TrialExpiring when a trial entitlement's
 * trial end, comes within its lead time: each once per entitlement and deadline (a deadline that moves gets a
 * notice of its own). A deadline already within the lead time when set is noticed at the next tick; one past is not.
 */
export function expiryNoticesJob(
  dataSource: DataSource,
  events: Outbox,
  leads: NoticeLeads,
  pageSize = SCAN_PAGE_SIZE,
): ScheduledJob {
  const entitlements = new SqlTable(dataSource, EntitlementEntity);
  const date = (value: Date) =>
    dataSource.driver.preparePersistentValue(
      value,
      entitlements.columns.find((c) => c.propertyName === "createdAt") as never,
    );
  return {
    name: "entitlement-expiry-notices",
    async run(now) {
      const horizon = new Date(now.getTime() + leads.expiringMs);
      const expiring = await readSerially(dataSource, () =>
        entitlements.select(
          dataSource.manager,
          "is_template = ? AND is_revoked = ? AND expiration_date_time > ? AND expiration_date_time <= ? " +
            "AND NOT EXISTS (SELECT 1 FROM entitlement_notices n WHERE n.entitlement_id = entitlements.id AND n.kind = 'expiring' AND n.due_at = entitlements.expiration_date_time) LIMIT ?",
          [bool(dataSource, false), bool(dataSource, false), date(now), date(horizon), BATCH],
        ),
      );
      for (const row of expiring) {
        await notify(dataSource, events, row, "expiring", row.expirationDateTime as Date, now, date);
      }
      const trials = (after: string, limit: number) =>
        readSerially(dataSource, () =>
          entitlements.select(
            dataSource.manager,
            "is_template = ? AND is_revoked = ? AND is_entitlement_trial = ? AND id > ? ORDER BY id LIMIT ?",
            [bool(dataSource, false), bool(dataSource, false), bool(dataSource, true), after, limit],
          ),
        );
      await scanInPages(
        trials,
        async (rows) => {
          for (const row of rows) {
            const ends = trialEndOf(row);
            if (ends && ends > now && ends.getTime() <= now.getTime() + leads.trialExpiringMs) {
              await notify(dataSource, events, row, "trial-expiring", ends, now, date);
            }
          }
        },
        pageSize,
      );
    },
  };
}

/** A trial entitlement's end, when known (a trial counted from a first activation not yet made has none). */
function trialEndOf(row: EntitlementRow): Date | null {
  const policy = policyOf(row);
  const trial = policy?.trialActivationPolicy;
  if (!trial) return null;
  if (trial.trialPeriodStartsAfterFirstActivation && !trial.trialEndsAt) return dateOf(trial.notValidAfterTimestamp);
  const timeline = { expirationDateTime: null, createdAt: row.createdAt, policy, trial: true };
  return trialEnd({ ...timeline, firstActivationAt: row.createdAt });
}

/** The notice's marker and its event, in one transaction; nothing when the marker exists (sent before). */
async function notify(
  dataSource: DataSource,
  events: Outbox,
  row: EntitlementRow,
  kind: "expiring" | "trial-expiring",
  dueAt: Date,
  now: Date,
  date: (value: Date) => unknown,
): Promise<void> {
  const writes = events.writes();
  try {
    await inTransaction(dataSource, async (manager: EntityManager) => {
      await manager.query(
        "INSERT INTO entitlement_notices (entitlement_id, kind, due_at, created_at) VALUES (?, ?, ?, ?)",
        [row.id, kind, date(dueAt), date(now)],
      );
      await writes.append(manager, [noticeEvent(row, kind, dueAt, now)]);
    });
    writes.committed();
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
  }
}

function noticeEvent(row: EntitlementRow, kind: "expiring" | "trial-expiring", dueAt: Date, now: Date): EventDraft {
  const common = { ...entitlementData(row), customerContactEmail: row.customerContactEmail };
  if (kind === "expiring") {
    const data = create(EntitlementExpiringDataSchema, { ...common, expiresAt: timestampFromDate(dueAt) });
    return entitlementEvent(row, "Entitlement.Expiring", now, EntitlementExpiringDataSchema, data);
  }
  const data = create(EntitlementTrialExpiringDataSchema, { ...common, trialEndsAt: timestampFromDate(dueAt) });
  return entitlementEvent(row, "Entitlement.TrialExpiring", now, EntitlementTrialExpiringDataSchema, data);
}

function bool(dataSource: DataSource, value: boolean): unknown {
  return dataSource.options.type === "mysql" ? value : value ? 1 : 0;
}
