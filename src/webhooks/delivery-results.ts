import { randomUUID } from "node:crypto";
import type { DataSource, EntityManager } from "typeorm";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import type { Clock } from "../platform/clock.js";
import { type BatchedTransaction, inBatchedTransaction } from "../platform/statement-batch.js";
import type { AttemptResult, Outcome, Settlement } from "./delivery-outcome.js";
import type { DeliveryStore } from "./delivery-store.js";
import type { WebhookAttemptRow, WebhookDeliveryRow, WebhookSubscriptionRow } from "./entities.js";
import { CHALLENGE_EVENT_TYPE } from "./event-catalog.js";
import type { SubscriptionStore } from "./subscription-store.js";

/** Results written together at most this long after the first of them arrived. */
const FLUSH_DELAY_MS = 5;
/** A batch this large is written at once. */
const FLUSH_SIZE = 200;
/**
 * A batch whose write failed is tried again, waiting longer each time; given up after the last try, its deliveries
 * stay claimed and are attempted again once their claims expire.
 */
const WRITE_ATTEMPTS = 5;
const WRITE_RETRY_MS = 500;

/** One attempt's result, as it is recorded. */
export interface DeliveryResult {
  delivery: WebhookDeliveryRow;
  outcome: Outcome;
  /** Absent when no attempt was made (the subscription was gone). */
  attempt?: { started: Date; result: AttemptResult; refusal: string | undefined };
  /** The subscription as read when the delivery was claimed. */
  subscription?: WebhookSubscriptionRow;
}

interface Queued {
  result: DeliveryResult;
  done: (error?: Error) => void;
}

/**
 * Records attempts and their deliveries' new states in batches: one transaction (one commit) for the results of
 * a few milliseconds, attempts in multi-row INSERTs, deliveries settled with the same outcome in one UPDATE each
 * (fenced by their claim). Only results that change their subscription (a challenge answered, 410 Gone, a first
 * failure or a first success after failures) read and write it.
 */
export class ResultWriter {
  private queue: Queued[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      dataSource: DataSource;
      deliveries: DeliveryStore;
      subscriptions: SubscriptionStore;
      clock: Clock;
    },
  ) {}

  record(result: DeliveryResult): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ result, done: (error) => (error ? reject(error) : resolve()) });
      if (this.queue.length >= FLUSH_SIZE) this.flushSoon(0);
      else this.flushSoon(FLUSH_DELAY_MS);
    });
  }

  private flushSoon(delayMs: number): void {
    if (this.timer && delayMs > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flushing.then(() => this.flush());
    }, delayMs);
  }

  /** Writes what is queued; a failed write is tried again a few times before its results are given up. */
  private async flush(): Promise<void> {
    const batch = this.queue.splice(0);
    if (batch.length === 0) return;
    const results = batch.map((queued) => queued.result);
    for (let attempt = 1; ; attempt++) {
      try {
        await inBatchedTransaction(this.deps.dataSource, (transaction) => this.write(transaction, results));
        for (const queued of batch) queued.done();
        return;
      } catch (error) {
        if (attempt >= WRITE_ATTEMPTS) {
          for (const queued of batch) queued.done(error as Error);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, WRITE_RETRY_MS * attempt));
      }
    }
  }

  /**
   * The attempts and the settlements shared by many results travel in one batch, with the commit unless a result
   * changes its subscription (those are written one by one after it).
   */
  private async write(transaction: BatchedTransaction, results: DeliveryResult[]): Promise<void> {
    const { deliveries } = this.deps;
    const now = this.deps.clock.now();
    const attempts = results.flatMap((result) => (result.attempt ? [attemptRow(result.delivery, result.attempt)] : []));
    const individual = results.filter((result) => changesSubscription(result));
    const grouped = new Map<string, DeliveryResult[]>();
    for (const result of results) {
      if (individual.includes(result)) continue;
      const key = `${result.delivery.claimId}|${settlementKey(result.outcome.settlement)}`;
      grouped.set(key, [...(grouped.get(key) ?? []), result]);
    }
    const settlements = [...grouped.values()].map((group) => {
      const settlement = group[0].outcome.settlement;
      const completedAt = settlement.completedAt ? now : null;
      return deliveries.settleManyStatement(
        group.map((result) => result.delivery),
        { ...settlement, completedAt },
      );
    });
    const statements = [...deliveries.addAttemptsStatements(attempts), ...settlements];
    const lostCopies = deliveries.dropLostCopiesStatements(attempts);
    if (individual.length === 0) {
      await transaction.commitWith([...statements, ...lostCopies]);
      return;
    }
    await transaction.run(statements);
    const manager = await transaction.open();
    for (const result of individual) await this.settleWithSubscription(manager, result, now);
    if (lostCopies.length > 0) await transaction.run(lostCopies);
  }

  private async settleWithSubscription(manager: EntityManager, result: DeliveryResult, now: Date): Promise<void> {
    const { deliveries, subscriptions } = this.deps;
    const { delivery, outcome } = result;
    if (!(await deliveries.settle(manager, delivery, outcome.settlement))) return;
    // Locked and read again: an administrator's change meanwhile is kept, and the decision uses the current row.
    const subscription = await subscriptions.lockAny(manager, delivery.subscriptionId);
    if (!subscription || subscription.deletedAt) return;
    const changed = subscriptionAfter(subscription, result, now);
    if (!changed) return;
    await subscriptions.setStanding(manager, changed);
    if (changed.state === SubscriptionState.ACTIVE && subscription.state !== SubscriptionState.ACTIVE) {
      await deliveries.releaseParked(manager, subscription.id, now);
    }
    if (changed.state === SubscriptionState.DISABLED) await deliveries.cancelPending(manager, subscription.id, now);
  }
}

/** Whether a result may change its subscription, as the subscription was read at the claim. */
function changesSubscription(result: DeliveryResult): boolean {
  if (!result.attempt || !result.subscription) return false;
  return subscriptionAfter(result.subscription, result, new Date()) !== null;
}

/** The subscription (as it stands now) after an attempt, or null when it does not change. */
function subscriptionAfter(
  subscription: WebhookSubscriptionRow,
  { delivery, outcome }: DeliveryResult,
  now: Date,
): WebhookSubscriptionRow | null {
  if (outcome.gone && goneFromCurrentEndpoint(subscription, delivery)) {
    return { ...subscription, state: SubscriptionState.DISABLED, challengeDeliveryId: null, updatedAt: now };
  }
  if (outcome.succeeded && subscription.challengeDeliveryId === delivery.id) {
    return {
      ...subscription,
      state: SubscriptionState.ACTIVE,
      challengeDeliveryId: null,
      failingSince: null,
      verifiedAt: subscription.verifiedAt ?? now,
      updatedAt: now,
    };
  }
  if (outcome.succeeded && subscription.failingSince) return { ...subscription, failingSince: null };
  if (!outcome.succeeded && !subscription.failingSince && delivery.eventType !== CHALLENGE_EVENT_TYPE) {
    return { ...subscription, failingSince: now };
  }
  return null;
}

/**
 * Whether a 410 Gone speaks for the subscription as it stands: while it is Active, or as its current challenge. (An
 * attempt in flight when an administrator moved the subscription is never settled here: the move parked it.)
 */
function goneFromCurrentEndpoint(subscription: WebhookSubscriptionRow, delivery: WebhookDeliveryRow): boolean {
  return subscription.state === SubscriptionState.ACTIVE || subscription.challengeDeliveryId === delivery.id;
}

/** What settlements written by one UPDATE share (the step goes one further for each, the end is the write's time). */
function settlementKey(settlement: Settlement): string {
  return JSON.stringify([
    settlement.status,
    settlement.nextAttemptAt?.getTime() ?? null,
    settlement.lastStatusCode,
    settlement.lastError,
    settlement.completedAt !== null,
  ]);
}

/** The audit row of an attempt; its error is why it failed (no answer, or a challenge reply refused). */
function attemptRow(
  delivery: WebhookDeliveryRow,
  { started, result, refusal }: NonNullable<DeliveryResult["attempt"]>,
): WebhookAttemptRow {
  const answered = "status" in result;
  return {
    id: randomUUID(),
    deliveryId: delivery.id,
    attempt: delivery.attemptCount,
    startedAt: started,
    durationMs: Math.round(result.durationMs),
    statusCode: answered ? result.status : 0,
    error: (answered ? (refusal ?? "") : result.error).slice(0, 1000),
    responseBody: answered ? result.body.toString("utf8") : null,
    responseTruncated: answered ? result.truncated : false,
  };
}
