import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import type { AccessTokens } from "../auth/access-tokens.js";
import type { ClientStates } from "../auth/client-states.js";
import type { Clock } from "../platform/clock.js";
import type { Logger } from "../platform/logger.js";
import type { WebhookConfig } from "../platform/webhook-config.js";
import type { CallbackGrants } from "./callback-grants.js";
import { CallbackTokens } from "./callback-tokens.js";
import { DeliveryStore } from "./delivery-store.js";
import { DeliveryWorker } from "./delivery-worker.js";
import { Outbox } from "./outbox.js";
import { retentionJob } from "./retention.js";
import type { HostLookup } from "./safe-resolve.js";
import { SubscriptionStore } from "./subscription-store.js";
import { suspensionJob } from "./suspension.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

export interface WebhookRuntimeOptions {
  dataSource: DataSource;
  clock: Clock;
  logger: Logger;
  keyEncryptionKey: Buffer | undefined;
  config: WebhookConfig;
  tokens: AccessTokens;
  clients: ClientStates;
  callbackGrants?: CallbackGrants;
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
    callbackGrants: options.callbackGrants,
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
  return {
    dependencies,
    outbox,
    /** The webhooks' time-driven work, for the scheduler. */
    jobs: [
      suspensionJob(dependencies, config.suspendAfterMs),
      retentionJob(dataSource, dependencies.deliveries, config.retentionDays),
    ],
    start: () => worker.start(),
    close: (graceMs?: number) => worker.close(graceMs),
  };
}
