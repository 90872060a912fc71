import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import type { AccessTokens } from "../auth/access-tokens.js";
import type { ClientStates } from "../auth/client-states.js";
import { expiryNoticesJob } from "../licensing/expiry-notices.js";
import type { Clock } from "../platform/clock.js";
import type { Logger } from "../platform/logger.js";
import { Scheduler } from "../platform/scheduler.js";
import { SchedulerLease } from "../platform/scheduler-lease.js";
import type { WebhookConfig } from "../platform/webhook-config.js";
import { CallbackTokens } from "./callback-tokens.js";
import { DeliveryStore } from "./delivery-store.js";
import { DeliveryWorker } from "./delivery-worker.js";
import { Outbox } from "./outbox.js";
import { retentionJob } from "./retention.js";
import type { HostLookup } from "./safe-resolve.js";
import { SubscriptionStore } from "./subscription-store.js";
import { suspensionJob } from "./suspension.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

/** The lease of the time-driven work (notices, suspension, pruning). */
const SCHEDULER_LEASE = "provision-scheduler";

export interface WebhookRuntimeOptions {
  dataSource: DataSource;
  clock: Clock;
  logger: Logger;
  keyEncryptionKey: Buffer | undefined;
  config: WebhookConfig;
  tokens: AccessTokens;
  clients: ClientStates;
  /** Tests: resolve host names without DNS. */
  lookup?: HostLookup;
  /** Tests: the retry jitter's randomness. */
  random?: () => number;
}

/** The webhook parts of one instance: the outbox licensing writes to, the admin RPCs' dependencies, the worker. */
export function createWebhooks(options: WebhookRuntimeOptions) {
  const { dataSource, clock, logger, config } = options;
  const outbox = new Outbox(dataSource);
  const dependencies: WebhookDependencies = {
    dataSource,
    subscriptions: new SubscriptionStore(dataSource),
    deliveries: new DeliveryStore(dataSource),
    outbox,
    clock,
    newId: randomUUID,
    keyEncryptionKey: options.keyEncryptionKey,
    trustedTargets: config.trustedTargets,
    lookup: options.lookup,
  };
  const callbackTokens = new CallbackTokens({
    tokens: options.tokens,
    clients: options.clients,
    clock,
    lifetimeSeconds: config.callbackTokenTtlSeconds,
    logger,
  });
  const worker = new DeliveryWorker({
    ...dependencies,
    logger,
    callbackTokens,
    random: options.random ?? Math.random,
    settings: {
      retrySchedule: config.retrySchedule,
      pollIntervalMs: config.pollIntervalMs,
      concurrency: config.concurrency,
      timeoutMs: config.timeoutMs,
      trustedTargets: config.trustedTargets,
      lookup: options.lookup,
    },
  });
  const scheduler = new Scheduler({
    lease: new SchedulerLease(dataSource, clock, SCHEDULER_LEASE, Math.max(3 * config.schedulerIntervalMs, 30_000)),
    intervalMs: config.schedulerIntervalMs,
    clock,
    logger,
    jobs: [
      suspensionJob(dependencies, config.suspendAfterMs),
      retentionJob(dataSource, dependencies.deliveries, config.retentionDays),
      expiryNoticesJob(dataSource, outbox, {
        expiringMs: config.expiringNoticeMs,
        trialExpiringMs: config.trialExpiringNoticeMs,
      }),
    ],
  });
  return {
    dependencies,
    outbox,
    scheduler,
    start: () => {
      worker.start();
      scheduler.start();
    },
    close: async (graceMs?: number) => {
      await scheduler.close();
      await worker.close(graceMs);
    },
  };
}
