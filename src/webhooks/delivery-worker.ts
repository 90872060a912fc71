import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import type { Clock } from "../platform/clock.js";
import { dialectOf, readSerially } from "../platform/database.js";
import type { Logger } from "../platform/logger.js";
import { loggedFailure } from "../platform/lost-connections.js";
import { inBatchedTransaction, runBatch } from "../platform/statement-batch.js";
import { CALLBACK_TOKEN_HEADER, type CallbackTokens } from "./callback-tokens.js";
import { checkChallengeReply } from "./challenge.js";
import { type AttemptResult, type Outcome, outcomeOf } from "./delivery-outcome.js";
import { ResultWriter } from "./delivery-results.js";
import { DELIVERY_STATUS, type DeliveryStore } from "./delivery-store.js";
import type { WebhookDeliveryRow, WebhookSubscriptionRow } from "./entities.js";
import { CHALLENGE_EVENT_TYPE } from "./event-catalog.js";
import { FAN_OUT_BATCH, fanOut } from "./fan-out.js";
import type { Outbox } from "./outbox.js";
import { signatureHeader, webhookTimestamp } from "./signing.js";
import { signingKeys } from "./subscription-secrets.js";
import type { TimestampFormat } from "./subscription-states.js";
import type { SubscriptionStore } from "./subscription-store.js";
import { type PostResult, postToTarget, type TransportSettings } from "./webhook-transport.js";

const CONTENT_TYPE = "application/cloudevents+json; charset=utf-8";
/**
 * A claim outlives the request's time-out by this much (the host's DNS lookup may take up to 10 s of it) before
 * another worker may take the delivery over.
 */
const CLAIM_MARGIN_MS = 30_000;

export interface WorkerSettings extends TransportSettings {
  retrySchedule: readonly number[];
  pollIntervalMs: number;
  concurrency: number;
}

export interface WorkerDependencies {
  dataSource: DataSource;
  deliveries: DeliveryStore;
  subscriptions: SubscriptionStore;
  outbox: Outbox;
  clock: Clock;
  logger: Logger;
  keyEncryptionKey: Buffer | undefined;
  callbackTokens: CallbackTokens | undefined;
  settings: WorkerSettings;
  random: () => number;
}

/**
 * Sends what the outbox holds: matches new events to subscriptions, claims due deliveries (several
 * instances claim different ones), posts each signed, and records every attempt. Woken when a transaction
 * with events commits on this instance, at the next due retry, and at least every poll interval.
 */
export class DeliveryWorker {
  private running = false;
  private round: Promise<void> | undefined;
  /** Events may be waiting to be matched to subscriptions (a commit or the poll said so). */
  private eventsWaiting = false;
  private again = false;
  private closed = false;
  /** Deliveries being attempted (their HTTP request under way). */
  private inFlight = 0;
  /** Attempts made whose results are not written yet. */
  private unrecorded = 0;
  private poll: NodeJS.Timeout | undefined;
  private dueTimer: NodeJS.Timeout | undefined;
  private stopListening: (() => void) | undefined;
  private idle: (() => void) | undefined;

  private readonly results: ResultWriter;
  /** How many times the concurrency attempts and unwritten results together may reach. */
  private readonly resultAllowance: number;

  constructor(private readonly deps: WorkerDependencies) {
    this.results = new ResultWriter(deps);
    this.resultAllowance = dialectOf(deps.dataSource) === "mysql" ? 2 : 1;
  }

  start(): void {
    this.stopListening = this.deps.outbox.onCommitted(() => this.kick(true));
    this.poll = setInterval(() => this.kick(true), this.deps.settings.pollIntervalMs).unref();
    this.kick(true);
  }

  /** Runs a round (at once, or after the one under way): claims, and first matches new events when `newEvents`. */
  kick(newEvents = false): void {
    if (newEvents) this.eventsWaiting = true;
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.round = this.run()
      .catch((error: Error) => this.deps.logger.warn({ err: loggedFailure(error) }, "webhook delivery round failed"))
      .finally(() => {
        this.running = false;
        if (this.again) this.kick();
      });
  }

  /** Stops claiming; waits up to `graceMs` for deliveries under way. */
  async close(graceMs = 5000): Promise<void> {
    this.closed = true;
    clearInterval(this.poll);
    clearTimeout(this.dueTimer);
    this.stopListening?.();
    const grace = new Promise((resolve) => setTimeout(resolve, graceMs).unref());
    // A round under way may be claiming: it sends nothing once closed, but its transaction must end first.
    await Promise.race([this.round, grace]);
    if (this.busy === 0) return;
    await Promise.race([
      new Promise<void>((resolve) => {
        this.idle = resolve;
      }),
      grace,
    ]);
  }

  private async run(): Promise<void> {
    let drained = false;
    do {
      this.again = false;
      if (this.eventsWaiting) {
        this.eventsWaiting = false;
        // A batch short of full took every event committed before it; one committed since kicks another round.
        while (!this.closed && (await fanOut(this.deps, this.deps.clock.now())) === FAN_OUT_BATCH);
      }
      drained = await this.claimAndSend();
    } while (this.again && !this.closed);
    if (drained) await this.wakeAtNextDue();
  }

  private get busy(): number {
    return this.inFlight + this.unrecorded;
  }

  /**
   * Claims as many due deliveries as there are free request slots. On MySQL a slot is free again once its
   * attempt is answered, and results waiting to be written count against twice the concurrency, so claims never
   * outrun them; on SQLite, where claims and results queue for the one connection, only once its result is written.
   */
  /** Answers whether it found fewer due deliveries than it could take (none left for now). */
  private async claimAndSend(): Promise<boolean> {
    const { concurrency } = this.deps.settings;
    const free = Math.min(concurrency - this.inFlight, this.resultAllowance * concurrency - this.busy);
    // With slots freed one by one, claims wait for a quarter of them: each claim is a transaction of its own.
    const enough = this.busy === 0 || this.resultAllowance === 1 ? 1 : Math.ceil(concurrency / 4);
    if (free < enough || this.closed) return false;
    const { dataSource, deliveries, subscriptions } = this.deps;
    const now = this.deps.clock.now();
    const claimUntil = new Date(now.getTime() + this.deps.settings.timeoutMs + CLAIM_MARGIN_MS);
    const claimed = await inBatchedTransaction(dataSource, (transaction) =>
      deliveries.claimDue(transaction, { claimId: randomUUID(), now, claimUntil, limit: free }),
    );
    if (claimed.length === 0) return true;
    // Closed meanwhile: the claims expire and the deliveries are attempted again (by another instance, or after a
    // restart), rather than posted while the service shuts down.
    if (this.closed) return true;
    const [subscriptionRows, payloadRows] = await readSerially(dataSource, () =>
      runBatch(dataSource.manager, [
        ...subscriptions.findAnyOfStatement(claimed.map((delivery) => delivery.subscriptionId)),
        ...deliveries.payloadsStatement(claimed.map((delivery) => delivery.eventId)),
      ]),
    );
    const batch = {
      subscriptions: subscriptions.subscriptionsFrom(subscriptionRows),
      payloads: deliveries.payloadsFrom(payloadRows),
      keys: new Map<string, Buffer[]>(),
    };
    for (const delivery of claimed) {
      this.inFlight++;
      this.deliver(delivery, batch)
        .then(({ recorded }) => this.whenRecorded(delivery, recorded))
        .catch((error: Error) =>
          this.deps.logger.warn({ err: error, deliveryId: delivery.id }, "webhook delivery failed"),
        )
        .finally(() => this.settled(() => this.inFlight--));
    }
    return claimed.length < free;
  }

  private whenRecorded(delivery: WebhookDeliveryRow, recorded: Promise<void>): void {
    this.unrecorded++;
    recorded
      .catch((error: Error) =>
        this.deps.logger.warn(
          { err: loggedFailure(error), deliveryId: delivery.id },
          "webhook delivery could not be recorded",
        ),
      )
      .finally(() => this.settled(() => this.unrecorded--));
  }

  private settled(count: () => void): void {
    count();
    if (this.busy === 0) this.idle?.();
    this.kick();
  }

  private async wakeAtNextDue(): Promise<void> {
    if (this.closed) return;
    const { dataSource, deliveries, clock } = this.deps;
    const next = await readSerially(dataSource, () => deliveries.nextDue(dataSource.manager));
    clearTimeout(this.dueTimer);
    if (!next) return;
    const waitMs = Math.max(0, next.getTime() - clock.now().getTime());
    if (waitMs < this.deps.settings.pollIntervalMs) this.dueTimer = setTimeout(() => this.kick(), waitMs).unref();
  }

  /** Attempts a delivery; answers once it is answered, with the writing of its result under way. */
  private async deliver(delivery: WebhookDeliveryRow, batch: ClaimedBatch): Promise<{ recorded: Promise<void> }> {
    const subscription = batch.subscriptions.get(delivery.subscriptionId);
    const payload = batch.payloads.get(delivery.eventId);
    if (!subscription || subscription.deletedAt || payload === undefined) {
      return { recorded: this.results.record({ delivery, outcome: cancelled(this.deps.clock.now()) }) };
    }
    const started = this.deps.clock.now();
    const { result, refusal } = await this.attempt(delivery, subscription, payload, batch, started).catch(
      (error: Error) => {
        // A delivery that cannot even be prepared (its secret cannot be unsealed, a callback token cannot be
        // issued) is a failed attempt on the retry schedule, not a claim retried for ever.
        this.deps.logger.warn({ err: error, deliveryId: delivery.id }, "webhook delivery could not be prepared");
        const failed: PostResult = { error: "internal error preparing the delivery", durationMs: 0 };
        return { result: failed, refusal: undefined };
      },
    );
    const outcome = outcomeOf(
      delivery,
      result,
      { schedule: this.deps.settings.retrySchedule, random: this.deps.random },
      this.deps.clock.now(),
      refusal,
    );
    return {
      recorded: this.results.record({ delivery, outcome, attempt: { started, result, refusal }, subscription }),
    };
  }

  /** Signs and posts one attempt; answers its result and, for a challenge, why its reply is refused. */
  private async attempt(
    delivery: WebhookDeliveryRow,
    subscription: WebhookSubscriptionRow,
    payload: string,
    batch: ClaimedBatch,
    started: Date,
  ): Promise<{ result: PostResult; refusal: string | undefined }> {
    const keys = keysOf(batch, subscription, started, this.deps.keyEncryptionKey);
    const timestamp = webhookTimestamp(started, subscription.timestampFormat as TimestampFormat);
    const body = Buffer.from(payload);
    const headers: Record<string, string> = {
      "content-type": CONTENT_TYPE,
      "user-agent": "Provision-Webhooks/1",
      "webhook-id": delivery.eventId,
      "webhook-timestamp": timestamp,
      "webhook-signature": signatureHeader(keys, delivery.eventId, timestamp, body),
      "webhook-event-type": delivery.eventType,
      "webhook-delivery-attempt": String(delivery.attemptCount),
    };
    const callbackToken = await this.callbackTokenOf(subscription, delivery);
    if (callbackToken) headers[CALLBACK_TOKEN_HEADER] = callbackToken;
    const result = await postToTarget(subscription.url, headers, body, this.deps.settings);
    return { result, refusal: this.challengeRefusal(delivery, result, { timestamp, keys, payload }) };
  }

  private async callbackTokenOf(subscription: WebhookSubscriptionRow, delivery: WebhookDeliveryRow) {
    const scopes = JSON.parse(subscription.callbackScopes) as string[];
    if (!this.deps.callbackTokens || scopes.length === 0 || delivery.eventType === CHALLENGE_EVENT_TYPE)
      return undefined;
    return this.deps.callbackTokens.tokenFor({
      subscriptionId: subscription.id,
      providerId: subscription.providerId,
      clientId: subscription.callbackClientId,
      scopes,
    });
  }

  /** Why a challenge's 2xx answer does not verify the subscription; undefined when it does (or for other events). */
  private challengeRefusal(
    delivery: WebhookDeliveryRow,
    result: AttemptResult & { responseSignature?: string },
    sent: { timestamp: string; keys: Buffer[]; payload: string },
  ): string | undefined {
    if (delivery.eventType !== CHALLENGE_EVENT_TYPE || !("status" in result)) return undefined;
    if (result.status < 200 || result.status >= 300) return undefined;
    const challenge = (JSON.parse(sent.payload) as { data: { challenge: string } }).data.challenge;
    const verdict = checkChallengeReply({
      requestId: delivery.eventId,
      requestTimestamp: sent.timestamp,
      responseBody: result.truncated ? Buffer.alloc(0) : result.body,
      responseSignature: result.responseSignature,
      keys: sent.keys,
      challenge,
    });
    return verdict.ok ? undefined : verdict.error;
  }
}

function cancelled(now: Date): Outcome {
  return {
    settlement: {
      status: DELIVERY_STATUS.cancelled,
      nextAttemptAt: null,
      scheduleStep: 0,
      lastStatusCode: 0,
      lastError: "subscription deleted",
      completedAt: now,
    },
    gone: false,
    succeeded: false,
  };
}

/** What a claimed batch's deliveries share: their subscriptions and payloads, read once, and each one's keys. */
interface ClaimedBatch {
  subscriptions: Map<string, WebhookSubscriptionRow>;
  payloads: Map<string, string>;
  keys: Map<string, Buffer[]>;
}

function keysOf(batch: ClaimedBatch, subscription: WebhookSubscriptionRow, now: Date, keyEncryptionKey?: Buffer) {
  let keys = batch.keys.get(subscription.id);
  if (!keys) {
    keys = signingKeys(subscription, now, keyEncryptionKey);
    batch.keys.set(subscription.id, keys);
  }
  return keys;
}
