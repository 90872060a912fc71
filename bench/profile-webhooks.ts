/**
 * Where webhook delivery's server time goes:
 *   node --import tsx bench/profile-webhooks.ts <fan-out|latency> [mysql|embedded] [seconds]
 * starts the service under --cpu-prof (pinned to its core, as `npm run bench` does) with the webhook rows' receiver
 * and subscriptions, runs one of their measurements (`seconds`, default 8), stops the service and prints its
 * figures and the functions and files with the most samples while it ran, as JSON. fan-out: a burst of events to
 * 10 subscriptions, the window from the events' commit to the last arrival; latency: SetClaimBasedSeats paced
 * at 50/s to one subscription. The profile is left in a temporary folder it names.
 */
import { ensureCompiled } from "../test/support/compiled-build.js";
import { profileFolder, stopAndSummarize } from "./cpu-profile.js";
import { killChildren, pinSelf } from "./processes.js";
import { type Mode, profiledMain } from "./provision-server.js";
import { startWebhookBench, type WebhookBench } from "./webhook-fixture.js";
import { monotonicMs } from "./webhook-receiver.js";
import { burstRound, pacedRound } from "./webhook-rounds.js";
import { EVENTS_PER_SECOND, FAN_OUT_SUBSCRIPTIONS, LATENCY_RATE } from "./webhook-rows.js";

const [measurement = "fan-out", mode = "mysql", seconds = "8"] = process.argv.slice(2);

/** The measurement's figures and its window on the monotonic clock. */
async function measure(bench: WebhookBench) {
  if (measurement === "latency") {
    await bench.subscribe([0]);
    const startedMs = monotonicMs();
    const figures = await pacedRound(bench, { rate: LATENCY_RATE, seconds: Number(seconds), warmupSeconds: 0 });
    return { figures, window: { startedMs, lastArrivalMs: monotonicMs() } };
  }
  if (measurement !== "fan-out") throw new Error(`unknown measurement ${measurement}: fan-out or latency`);
  await bench.subscribe(Array.from({ length: FAN_OUT_SUBSCRIPTIONS }, (_, index) => index));
  const template = await bench.outbox.template("Entitlement.PlanApplied");
  await burstRound(bench, template, EVENTS_PER_SECOND, FAN_OUT_SUBSCRIPTIONS);
  return burstRound(bench, template, EVENTS_PER_SECOND * Number(seconds), FAN_OUT_SUBSCRIPTIONS);
}

async function main() {
  ensureCompiled();
  pinSelf();
  const folder = profileFolder();
  const bench = await startWebhookBench(mode as Mode, FAN_OUT_SUBSCRIPTIONS, "info", profiledMain(folder));
  try {
    const { figures, window } = await measure(bench);
    const summary = await stopAndSummarize(folder, bench.provision, {
      seconds: (window.lastArrivalMs - window.startedMs) / 1000,
      endedMsBeforeStop: monotonicMs() - window.lastArrivalMs,
    });
    console.log(JSON.stringify({ measurement, mode, figures, ...summary }, null, 2));
  } finally {
    await bench.stop();
  }
}

try {
  await main();
} finally {
  killChildren();
}
