import { randomUUID } from "node:crypto";
import type { DataSource, EntityManager } from "typeorm";
import { SqlTable } from "../catalog/sql-table.js";
import { changedRows, dialectOf, forUpdateSkipLocked } from "../platform/database.js";
import { type BatchedTransaction, runBatch, type Statement } from "../platform/statement-batch.js";
import {
  WebhookAttemptEntity,
  type WebhookAttemptRow,
  WebhookDeliveryEntity,
  type WebhookDeliveryRow,
  WebhookEventEntity,
  type WebhookEventRow,
} from "./entities.js";
import { CHALLENGE_EVENT_TYPE } from "./event-catalog.js";

/** A delivery's state after an attempt. */
export type Settlement = Pick<
  WebhookDeliveryRow,
  "status" | "nextAttemptAt" | "scheduleStep" | "lastStatusCode" | "lastError" | "completedAt"
>;

/** Stored delivery statuses: DeliveryStatus of webhook.proto. */
export const DELIVERY_STATUS = { pending: 1, succeeded: 2, failed: 3, cancelled: 4 } as const;

/** The SQL of the outbox's events, their deliveries and the deliveries' attempts. */
export class DeliveryStore {
  readonly deliveries: SqlTable<WebhookDeliveryRow>;
  readonly events: SqlTable<WebhookEventRow>;
  private readonly attempts: SqlTable<WebhookAttemptRow>;
  private readonly skipLocked: string;

  constructor(private readonly dataSource: DataSource) {
    this.deliveries = new SqlTable(dataSource, WebhookDeliveryEntity);
    this.events = new SqlTable(dataSource, WebhookEventEntity);
    this.attempts = new SqlTable(dataSource, WebhookAttemptEntity);
    this.skipLocked = forUpdateSkipLocked(dialectOf(dataSource));
  }

  date(value: Date): unknown {
    const column = this.deliveries.columns.find((candidate) => candidate.propertyName === "createdAt");
    return this.dataSource.driver.preparePersistentValue(value, column as never);
  }

  /** Events not yet matched to subscriptions, oldest first; locked (and skipped by other instances). */
  unfannedEventsStatement(limit: number): Statement {
    return this.events.selectStatement(`fanned_out_at IS NULL ORDER BY created_at, id LIMIT ?${this.skipLocked}`, [
      limit,
    ]);
  }

  eventsFrom(result: unknown): WebhookEventRow[] {
    return this.events.hydrateAll(result);
  }

  async markFannedOut(manager: EntityManager, eventIds: string[], now: Date): Promise<void> {
    await runBatch(manager, this.markFannedOutStatements(eventIds, now));
  }

  markFannedOutStatements(eventIds: string[], now: Date): Statement[] {
    if (eventIds.length === 0) return [];
    return [
      {
        sql: `UPDATE webhook_events SET fanned_out_at = ? WHERE id IN (${marks(eventIds)})`,
        parameters: [this.date(now), ...eventIds],
      },
    ];
  }

  async insertDeliveries(manager: EntityManager, rows: WebhookDeliveryRow[]): Promise<void> {
    if (rows.length > 0) await this.deliveries.insert(manager, rows);
  }

  /** The multi-row INSERTs of deliveries, for a batch. */
  insertDeliveriesStatements(rows: WebhookDeliveryRow[]): Statement[] {
    return chunks(rows, ROWS_PER_INSERT).map((chunk) => this.deliveries.insertStatement(chunk));
  }

  /**
   * Claims up to `limit` due deliveries for `claimId`: they are invisible to other claims until `claimUntil`
   * (a worker that dies mid-delivery leaves them due again then) and count one more attempt.
   */
  async claimDue(
    transaction: BatchedTransaction,
    claim: { claimId: string; now: Date; claimUntil: Date; limit: number },
  ): Promise<WebhookDeliveryRow[]> {
    const [found] = await transaction.run([
      this.deliveries.selectStatement(
        `status = ? AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?${this.skipLocked}`,
        [DELIVERY_STATUS.pending, this.date(claim.now), claim.limit],
      ),
    ]);
    const due = this.deliveries.hydrateAll(found);
    if (due.length === 0) return [];
    const ids = due.map((row) => row.id);
    await transaction.commitWith([
      {
        sql: `UPDATE webhook_deliveries SET next_attempt_at = ?, claim_id = ?, attempt_count = attempt_count + 1, last_attempt_at = ? WHERE id IN (${marks(ids)})`,
        parameters: [this.date(claim.claimUntil), claim.claimId, this.date(claim.now), ...ids],
      },
      ...this.addAttemptsStatements(due.filter((row) => row.claimId !== null).map(lostAttemptRow)),
    ]);
    return due.map((row) => ({
      ...row,
      nextAttemptAt: claim.claimUntil,
      claimId: claim.claimId,
      attemptCount: row.attemptCount + 1,
      lastAttemptAt: claim.now,
    }));
  }

  /** The soonest instant a pending delivery is due; null when none is scheduled. */
  async nextDue(manager: EntityManager): Promise<Date | null> {
    const [row] = await this.deliveries.select(
      manager,
      "status = ? AND next_attempt_at IS NOT NULL ORDER BY next_attempt_at LIMIT 1",
      [DELIVERY_STATUS.pending],
    );
    return row?.nextAttemptAt ?? null;
  }

  async payloadsOf(manager: EntityManager, eventIds: string[]): Promise<Map<string, string>> {
    const [rows] = await runBatch(manager, this.payloadsStatement(eventIds));
    return this.payloadsFrom(rows);
  }

  /** The events' envelopes, for a batch (none for no ids); `payloadsFrom` reads the result. */
  payloadsStatement(eventIds: string[]): Statement[] {
    const unique = [...new Set(eventIds)];
    if (unique.length === 0) return [];
    return [{ sql: `SELECT id, payload FROM webhook_events WHERE id IN (${marks(unique)})`, parameters: unique }];
  }

  payloadsFrom(result: unknown): Map<string, string> {
    const rows = (result ?? []) as { id: string; payload: string }[];
    return new Map(rows.map((row) => [row.id, row.payload]));
  }

  /** The INSERTs of attempts' audit rows, for a batch. */
  addAttemptsStatements(attempts: WebhookAttemptRow[]): Statement[] {
    return chunks(attempts, ROWS_PER_INSERT).map((chunk) => this.attempts.insertStatement(chunk));
  }

  /**
   * Deletes the rows a claim takeover wrote for these attempts as lost (`lostAttemptRow`): the instance that made
   * them was slow, not gone, and its own rows say what happened. Sent after the attempts' settlements, which wait
   * for a takeover in progress, so that its row is committed and seen.
   */
  dropLostCopiesStatements(attempts: WebhookAttemptRow[]): Statement[] {
    return chunks(attempts, ROWS_PER_INSERT).map((chunk) => ({
      sql: `DELETE FROM webhook_delivery_attempts WHERE error = ? AND (${chunk.map(() => "(delivery_id = ? AND attempt = ?)").join(" OR ")})`,
      parameters: [LOST_ATTEMPT_ERROR, ...chunk.flatMap((attempt) => [attempt.deliveryId, attempt.attempt])],
    }));
  }

  /**
   * Settles deliveries claimed under one claim with the same outcome, in one statement (each one step further on
   * its schedule); those whose claim was taken over meanwhile are left alone.
   */
  settleManyStatement(claimed: WebhookDeliveryRow[], outcome: Omit<Settlement, "scheduleStep">): Statement {
    const ids = claimed.map((delivery) => delivery.id);
    return {
      sql: `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, schedule_step = schedule_step + 1, last_status_code = ?, last_error = ?, completed_at = ?, claim_id = NULL WHERE claim_id = ? AND id IN (${marks(ids)})`,
      parameters: [
        outcome.status,
        outcome.nextAttemptAt ? this.date(outcome.nextAttemptAt) : null,
        outcome.lastStatusCode,
        outcome.lastError.slice(0, 1000),
        outcome.completedAt ? this.date(outcome.completedAt) : null,
        claimed[0].claimId,
        ...ids,
      ],
    };
  }

  /** Writes a claimed delivery's outcome, only while the claim is still the one it was made under. */
  async settle(manager: EntityManager, delivery: WebhookDeliveryRow, outcome: Settlement): Promise<boolean> {
    const changed = await changedRows(
      manager,
      "UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, schedule_step = ?, last_status_code = ?, last_error = ?, completed_at = ?, claim_id = NULL WHERE id = ? AND claim_id = ?",
      [
        outcome.status,
        outcome.nextAttemptAt ? this.date(outcome.nextAttemptAt) : null,
        outcome.scheduleStep,
        outcome.lastStatusCode,
        outcome.lastError.slice(0, 1000),
        outcome.completedAt ? this.date(outcome.completedAt) : null,
        delivery.id,
        delivery.claimId,
      ],
    );
    return changed > 0;
  }

  async find(manager: EntityManager, providerId: string, id: string): Promise<WebhookDeliveryRow | null> {
    const [row] = await this.deliveries.select(manager, "id = ? AND provider_id = ?", [id, providerId]);
    return row ?? null;
  }

  attemptsOf(manager: EntityManager, deliveryId: string): Promise<WebhookAttemptRow[]> {
    return this.attempts.select(manager, "delivery_id = ? ORDER BY attempt, started_at", [deliveryId]);
  }

  page(
    manager: EntityManager,
    query: { subscriptionId: string; status: number; eventType: string; offset: number; limit: number },
  ) {
    const where = ["subscription_id = ?"];
    const parameters: unknown[] = [query.subscriptionId];
    if (query.status) {
      where.push("status = ?");
      parameters.push(query.status);
    }
    if (query.eventType) {
      where.push("event_type = ?");
      parameters.push(query.eventType);
    }
    return this.deliveries.page(manager, {
      where: where.join(" AND "),
      parameters,
      order: "created_at DESC, id",
      offset: query.offset,
      limit: query.limit,
    });
  }

  /**
   * Puts failed deliveries back to pending, due at `dueAt` (null: parked), their retry schedule from the start;
   * answers how many.
   */
  async requeue(
    manager: EntityManager,
    where: { id?: string; subscriptionId?: string },
    dueAt: Date | null,
  ): Promise<number> {
    const [column, value] = where.id ? ["id", where.id] : ["subscription_id", where.subscriptionId];
    // A failed challenge is never sent again: the subscription's next challenge (verify, re-enable) replaces it.
    return changedRows(
      manager,
      `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, schedule_step = 0, completed_at = NULL WHERE ${column} = ? AND status = ? AND event_type <> ?`,
      [DELIVERY_STATUS.pending, dueAt ? this.date(dueAt) : null, value, DELIVERY_STATUS.failed, CHALLENGE_EVENT_TYPE],
    );
  }

  /** Whether a delivery to the subscription (a challenge aside) succeeded at or after `since`. */
  async succeededSince(manager: EntityManager, subscriptionId: string, since: Date): Promise<boolean> {
    const [row] = (await manager.query(
      "SELECT id FROM webhook_deliveries WHERE subscription_id = ? AND status = ? AND event_type <> ? AND completed_at >= ? LIMIT 1",
      [subscriptionId, DELIVERY_STATUS.succeeded, CHALLENGE_EVENT_TYPE, this.date(since)],
    )) as { id: string }[];
    return row !== undefined;
  }

  /** Cancels a subscription's pending deliveries (it was deleted or disabled). */
  async cancelPending(manager: EntityManager, subscriptionId: string, now: Date): Promise<void> {
    await manager.query(
      "UPDATE webhook_deliveries SET status = ?, next_attempt_at = NULL, completed_at = ?, claim_id = NULL WHERE subscription_id = ? AND status = ?",
      [DELIVERY_STATUS.cancelled, this.date(now), subscriptionId, DELIVERY_STATUS.pending],
    );
  }

  /** Cancels one delivery if it is still pending. */
  async cancelDelivery(manager: EntityManager, deliveryId: string, now: Date): Promise<void> {
    await manager.query(
      "UPDATE webhook_deliveries SET status = ?, next_attempt_at = NULL, completed_at = ?, claim_id = NULL WHERE id = ? AND status = ?",
      [DELIVERY_STATUS.cancelled, this.date(now), deliveryId, DELIVERY_STATUS.pending],
    );
  }

  /** Makes a subscription's parked deliveries (pending, unscheduled) due now: it is Active again. */
  async releaseParked(manager: EntityManager, subscriptionId: string, now: Date): Promise<void> {
    await manager.query(
      "UPDATE webhook_deliveries SET next_attempt_at = ? WHERE subscription_id = ? AND status = ? AND next_attempt_at IS NULL",
      [this.date(now), subscriptionId, DELIVERY_STATUS.pending],
    );
  }

  /** Parks a subscription's pending deliveries until it is Active again. */
  async parkPending(manager: EntityManager, subscriptionId: string): Promise<void> {
    await manager.query(
      "UPDATE webhook_deliveries SET next_attempt_at = NULL, claim_id = NULL WHERE subscription_id = ? AND status = ?",
      [subscriptionId, DELIVERY_STATUS.pending],
    );
  }
}

/** Rows per multi-row INSERT in a batch: as many as SqlTable's insertStatement takes. */
const ROWS_PER_INSERT = 100;

function chunks<T>(rows: T[], size: number): T[][] {
  const parts: T[][] = [];
  for (let start = 0; start < rows.length; start += size) parts.push(rows.slice(start, start + size));
  return parts;
}

function marks(values: unknown[]): string {
  return values.map(() => "?").join(", ");
}

/**
 * The audit row of an attempt whose claim expired with no outcome recorded: the instance that made it stopped (or
 * could not write the outcome) while it was in flight. Settling always clears the claim, so a due delivery still
 * naming one was left that way. Should that instance record the attempt after all, its row replaces this one.
 */
const LOST_ATTEMPT_ERROR =
  "no outcome recorded before its claim expired: the instance sending it stopped, or could not record it";

function lostAttemptRow(delivery: WebhookDeliveryRow): WebhookAttemptRow {
  return {
    id: randomUUID(),
    deliveryId: delivery.id,
    attempt: delivery.attemptCount,
    startedAt: delivery.lastAttemptAt ?? delivery.createdAt,
    durationMs: 0,
    statusCode: 0,
    error: LOST_ATTEMPT_ERROR,
    responseBody: null,
    responseTruncated: false,
  };
}
