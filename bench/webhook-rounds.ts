import http from "node:http";
import type { LoadFigures } from "./http-load.js";
import type { EventTemplate } from "./outbox-copies.js";
import { SERVER_CORE, type Spawned, spawnNode } from "./processes.js";
import type { WebhookBench } from "./webhook-fixture.js";
import { type BenchReceiver, monotonicMs, type ReceiverFigures } from "./webhook-receiver.js";

/** A burst's figures: deliveries per second from the first arrival to the last; p50/p99 from the start to arrival. */
export interface BurstFigures extends LoadFigures {
  deliveries: number;
  /** First arrival → last arrival. */
  spanMs: number;
  /** The events' commit (the bare sender's start) → last arrival, and the rate over it. */
  fromStartMs: number;
  fromStartPerSecond: number;
}

/** Sent → arrival, for changes sent at a steady rate. */
export interface PacedFigures extends LoadFigures {
  sent: number;
  arrived: number;
  /** Sent → the change's own answer (the REST PUT), for the service's rows. */
  changeP50Ms?: number;
  changeP99Ms?: number;
}

/** Where a burst began and the arrival of its last delivery, on the monotonic clock: the profiler's window. */
export interface BurstWindow {
  startedMs: number;
  lastArrivalMs: number;
}

const ARRIVAL_TIMEOUT_MS = 120_000;

/**
 * `events` copies of `template` committed at once into the outbox (each goes to every subscription), then one
 * change over REST, whose commit wakes the worker (a foreign insert would wait for its next poll); waits until
 * every delivery has arrived and has been recorded.
 */
export async function burstRound(
  bench: WebhookBench,
  template: EventTemplate,
  events: number,
  subscriptions: number,
): Promise<{ figures: BurstFigures; window: BurstWindow }> {
  await bench.receiver.reset();
  await bench.outbox.copy(template, events);
  const startedMs = monotonicMs();
  await bench.changeSeats();
  const expected = (events + 1) * subscriptions;
  await arrivalsOf(bench.receiver, expected);
  const received = await bench.receiver.figures();
  await bench.settle();
  return {
    figures: burstFigures(received, startedMs, expected),
    window: { startedMs, lastArrivalMs: received.arrivals.reduce((last, at) => Math.max(last, at), startedMs) },
  };
}

/** The bare sender's burst of `deliveries` to the same endpoints (after a warm-up of `warmup`). */
export async function bareBurst(
  bench: WebhookBench,
  template: EventTemplate,
  deliveries: { count: number; warmup: number; concurrency: number },
): Promise<BurstFigures> {
  const options = {
    mode: "burst",
    receiverUrl: bench.receiver.baseUrl,
    secrets: bench.secrets,
    payload: template.payload,
    templateId: template.id,
    count: deliveries.count,
    warmupCount: deliveries.warmup,
    concurrency: deliveries.concurrency,
  };
  const { startedMs } = await outputOf(spawnBareSender(options));
  await arrivalsOf(bench.receiver, deliveries.count);
  return burstFigures(await bench.receiver.figures(), startedMs, deliveries.count);
}

function burstFigures(received: ReceiverFigures, startedMs: number, expected: number): BurstFigures {
  const arrivals = [...received.arrivals].sort((a, b) => a - b);
  const first = arrivals[0] ?? startedMs;
  const last = arrivals.at(-1) ?? startedMs;
  const spanMs = last - first;
  const fromStart = arrivals.map((arrival) => arrival - startedMs);
  return {
    requestsPerSecond: spanMs > 0 ? Math.round(((arrivals.length - 1) * 1000) / spanMs) : 0,
    p50Ms: round(percentile(fromStart, 0.5)),
    p99Ms: round(percentile(fromStart, 0.99)),
    failures: failuresOf(received, expected),
    deliveries: received.unique,
    spanMs: round(spanMs),
    fromStartMs: round(last - startedMs),
    fromStartPerSecond: last > startedMs ? Math.round((arrivals.length * 1000) / (last - startedMs)) : 0,
  };
}

/**
 * SetClaimBasedSeats at `rate` per second for `seconds` (open loop, after `warmupSeconds` of the same): each
 * change's PlanApplied carries its seat count, by which the receiver's arrival is matched to the request's
 * due time.
 */
export async function pacedRound(
  bench: WebhookBench,
  pace: { rate: number; seconds: number; warmupSeconds: number },
): Promise<PacedFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  try {
    await sendSeatsPaced(bench, agent, pace.rate, pace.warmupSeconds);
    await bench.settle();
    await bench.receiver.reset();
    const { sentMs, answeredMs, failures } = await sendSeatsPaced(bench, agent, pace.rate, pace.seconds);
    const arrivals = await arrivalsBySeats(bench.receiver, sentMs);
    const answers = Object.entries(answeredMs).map(([seats, answered]) => answered - sentMs[seats]);
    return {
      ...pacedFigures(arrivals, sentMs, failures, pace.seconds),
      changeP50Ms: round(percentile(answers, 0.5)),
      changeP99Ms: round(percentile(answers, 0.99)),
    };
  } finally {
    agent.destroy();
  }
}

/** The bare sender, paced likewise: the transport's share of the latency. */
export async function barePaced(
  bench: WebhookBench,
  template: EventTemplate,
  pace: { rate: number; seconds: number; warmupSeconds: number },
): Promise<PacedFigures> {
  const options = {
    mode: "paced",
    receiverUrl: bench.receiver.baseUrl,
    secrets: bench.secrets,
    payload: template.payload,
    templateId: template.id,
    firstSeats: 1_000_000,
    ...pace,
  };
  const { sentMs } = await outputOf(spawnBareSender(options));
  return pacedFigures(await arrivalsBySeats(bench.receiver, sentMs), sentMs, 0, pace.seconds);
}

function pacedFigures(
  arrivals: Record<string, number>,
  sentMs: Record<string, number>,
  failures: number,
  seconds: number,
): PacedFigures {
  const latencies = Object.entries(sentMs)
    .filter(([seats]) => arrivals[seats] !== undefined)
    .map(([seats, sent]) => arrivals[seats] - sent);
  const sent = Object.keys(sentMs).length;
  return {
    requestsPerSecond: Math.round(latencies.length / seconds),
    p50Ms: round(percentile(latencies, 0.5)),
    p99Ms: round(percentile(latencies, 0.99)),
    failures: failures + sent - latencies.length,
    sent,
    arrived: latencies.length,
  };
}

interface PacedSends {
  /** When each change was due, and when its answer came, by seat count. */
  sentMs: Record<string, number>;
  answeredMs: Record<string, number>;
  /** Answers other than 2xx, and connection errors. */
  failures: number;
}

function sendSeatsPaced(bench: WebhookBench, agent: http.Agent, rate: number, seconds: number) {
  const total = Math.round(rate * seconds);
  const sends: PacedSends = { sentMs: {}, answeredMs: {}, failures: 0 };
  let answered = 0;
  return new Promise<PacedSends>((resolve) => {
    if (total === 0) {
      resolve(sends);
      return;
    }
    const start = monotonicMs();
    let sent = 0;
    const answer = (seats: number, ok: boolean) => {
      if (ok) sends.answeredMs[seats] = monotonicMs();
      else sends.failures++;
      if (++answered === total) resolve(sends);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(((monotonicMs() - start) * rate) / 1000) + 1);
      for (; sent < due; sent++) {
        const seats = bench.nextSeats();
        sends.sentMs[seats] = start + (sent * 1000) / rate;
        put(bench.provision.baseUrl, bench.seatsRequest(seats), agent, (ok) => answer(seats, ok));
      }
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
}

function put(
  baseUrl: string,
  request: { path: string; headers: Record<string, string>; body: string },
  agent: http.Agent,
  done: (ok: boolean) => void,
) {
  const outgoing = http.request(`${baseUrl}${request.path}`, { method: "PUT", headers: request.headers, agent });
  outgoing.once("response", (response) => {
    response.resume();
    response.once("end", () => done((response.statusCode ?? 0) < 300));
  });
  outgoing.setNoDelay(true);
  outgoing.once("error", () => done(false));
  outgoing.end(request.body);
}

/** Waits until `expected` deliveries have arrived, or the time-out (the figures then count the missing ones). */
async function arrivalsOf(receiver: BenchReceiver, expected: number): Promise<void> {
  const deadline = performance.now() + ARRIVAL_TIMEOUT_MS;
  while ((await receiver.count()) < expected && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The arrivals of the seat counts sent, once all have arrived or 10 s passed without all of them. */
async function arrivalsBySeats(receiver: BenchReceiver, sentMs: Record<string, number>) {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const { bySeats } = await receiver.figures();
    const missing = Object.keys(sentMs).some((seats) => bySeats[seats] === undefined);
    if (!missing || performance.now() > deadline) return bySeats;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function failuresOf(received: ReceiverFigures, expected: number): number {
  return received.badSignatures + received.duplicates + Math.max(0, expected - received.unique);
}

function spawnBareSender(options: Record<string, unknown>): Spawned {
  return spawnNode(["bench/bare-webhook-sender.mjs", JSON.stringify(options)], { core: SERVER_CORE, stdout: "pipe" });
}

/** What the bare sender prints when it is done (bench/bare-webhook-sender.mjs). */
interface SenderOutput {
  startedMs: number;
  sentMs: Record<string, number>;
}

async function outputOf(spawned: Spawned): Promise<SenderOutput> {
  let output = "";
  spawned.child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => spawned.child.once("close", resolve));
  if (code !== 0) throw new Error(`bare webhook sender failed (${code}): ${spawned.stderr()}`);
  return JSON.parse(output.trim().split("\n").at(-1) ?? "{}");
}

function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
}

function round(value: number): number {
  return Number(value.toFixed(2));
}
