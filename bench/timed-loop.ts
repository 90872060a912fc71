import type { LoadFigures } from "./http-load.js";

export interface TimedLoop {
  /** Milliseconds each step took. */
  latencies: number[];
  elapsedSeconds: number;
}

/** Runs `step` in `concurrency` loops, each starting a step again as soon as its last ended, for `seconds`. */
export async function loopFor(seconds: number, concurrency: number, step: (loop: number) => Promise<void>) {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < deadline) {
        const begin = performance.now();
        await step(loop);
        latencies.push(performance.now() - begin);
      }
    }),
  );
  return { latencies, elapsedSeconds: (performance.now() - started) / 1000 } satisfies TimedLoop;
}

/** Steps per second and their latency percentiles, as the HTTP loads report them. */
export function loopFigures({ latencies, elapsedSeconds }: TimedLoop): LoadFigures {
  const sorted = [...latencies].sort((a, b) => a - b);
  const percentile = (p: number) => Number((sorted[Math.floor(p * (sorted.length - 1))] ?? Number.NaN).toFixed(3));
  return {
    requestsPerSecond: Math.round(sorted.length / elapsedSeconds),
    p50Ms: percentile(0.5),
    p99Ms: percentile(0.99),
    failures: 0,
  };
}
