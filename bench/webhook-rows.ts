import { seedCatalog } from "./catalog-fixture.js";
import { driveHttp, type HttpTarget, type LoadFigures, type LoadOptions } from "./http-load.js";
import { licensingTargets, seedLicensing } from "./licensing-fixture.js";
import type { Mode } from "./provision-server.js";
import { type PathResult, pathResult } from "./report.js";
import { startWebhookBench, type WebhookBench } from "./webhook-fixture.js";
import { bareBurst, barePaced, burstRound, pacedRound } from "./webhook-rounds.js";

/** Subscriptions every burst event goes to. */
export const FAN_OUT_SUBSCRIPTIONS = 10;
/** Events per second of burst: at the goal (2,000 deliveries/s) a burst lasts the measurement's seconds. */
export const EVENTS_PER_SECOND = 200;
/** Seat changes per second in the latency row. */
export const LATENCY_RATE = 50;
/** Deliveries the service has under way at once by default (WEBHOOK_CONCURRENCY): the bare sender's too. */
const DELIVERY_CONCURRENCY = 64;
const PLAN_APPLIED = "Entitlement.PlanApplied";

/**
 * Webhook delivery, on a service of its own: change → receiver latency with one subscription (SetClaimBasedSeats
 * paced), then fan-out throughput to `FAN_OUT_SUBSCRIPTIONS` subscriptions (a burst of events committed into the
 * outbox at once); each against the bare sender posting the same signed requests to the same receiver. And
 * activation over several entitlements with that one subscription (every activation an event, delivered)
 * against the same activations measured before the provider had a subscription.
 */
export async function webhookRows(mode: Mode, load: LoadOptions, logLevel: string): Promise<PathResult[]> {
  console.error(`[${mode}] webhooks: service, receiver and subscriptions`);
  const bench = await startWebhookBench(mode, FAN_OUT_SUBSCRIPTIONS, logLevel);
  try {
    const activation = await activationTarget(bench);
    console.error(`[${mode}] ${activation.name}, no subscription`);
    const withoutWebhooks = await driveHttp(bench.provision.baseUrl, activation, load);
    await bench.subscribe([0]);
    const latency = await latencyRow(mode, bench, load);
    const activated = await activationRow(mode, bench, activation, withoutWebhooks, load);
    await bench.subscribe(Array.from({ length: FAN_OUT_SUBSCRIPTIONS - 1 }, (_, index) => index + 1));
    return [await fanOutRow(mode, bench, load), latency, activated];
  } finally {
    await bench.stop();
  }
}

/** The licensing fixture's activation over several entitlements, seeded on the webhook service. */
async function activationTarget(bench: WebhookBench): Promise<HttpTarget> {
  const { baseUrl, admin } = bench.provision;
  const catalog = await seedCatalog(baseUrl, admin);
  return licensingTargets(await seedLicensing(baseUrl, catalog.authorization, catalog.productId)).activateCustomers;
}

async function activationRow(
  mode: Mode,
  bench: WebhookBench,
  activation: HttpTarget,
  withoutWebhooks: LoadFigures,
  load: LoadOptions,
): Promise<PathResult> {
  const name = `${activation.name}, 1 webhook subscription (Entitlement.*)`;
  console.error(`[${mode}] ${name}`);
  const measured = await driveHttp(bench.provision.baseUrl, activation, load);
  await bench.settle();
  return pathResult(name, measured, withoutWebhooks, "no subscription");
}

async function latencyRow(mode: Mode, bench: WebhookBench, load: Pick<LoadOptions, "seconds" | "warmupSeconds">) {
  const name = `webhook latency, 1 subscription: SetClaimBasedSeats paced (${LATENCY_RATE}/s), sent → arrival`;
  console.error(`[${mode}] ${name}`);
  const pace = { rate: LATENCY_RATE, ...load };
  const measured = await pacedRound(bench, pace);
  const baseline = await barePaced(bench, await bench.outbox.template(PLAN_APPLIED), pace);
  return pathResult(name, measured, baseline, "bare", "p50 ≤ 100 ms");
}

async function fanOutRow(mode: Mode, bench: WebhookBench, load: Pick<LoadOptions, "seconds" | "warmupSeconds">) {
  const events = Math.max(50, Math.round(EVENTS_PER_SECOND * load.seconds));
  const warmupEvents = Math.max(20, Math.round(EVENTS_PER_SECOND * load.warmupSeconds));
  const subscriptions = FAN_OUT_SUBSCRIPTIONS;
  const name =
    `webhook fan-out: ${events} events × ${subscriptions} subscriptions, ` +
    "signed deliveries/s first → last arrival (p50/p99 from commit)";
  console.error(`[${mode}] ${name}`);
  const template = await bench.outbox.template(PLAN_APPLIED);
  await burstRound(bench, template, warmupEvents, subscriptions);
  const { figures } = await burstRound(bench, template, events, subscriptions);
  const baseline = await bareBurst(bench, template, {
    count: (events + 1) * subscriptions,
    warmup: warmupEvents * subscriptions,
    concurrency: DELIVERY_CONCURRENCY,
  });
  return pathResult(name, figures, baseline, "bare", "≥ 2,000/s");
}
