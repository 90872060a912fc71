import http from "node:http";
import { type HttpTarget, type LoadFigures, type LoadOptions, partsOf, type RequestParts } from "./http-load.js";

interface Pace extends LoadOptions {
  /** Requests per second, sent at even intervals whatever the answers do. */
  rate: number;
}

interface Outcome {
  latencies: number[];
  failures: number;
}

/**
 * Sends `target` at a steady `rate` (open loop) over up to `connections` keep-alive connections, after a
 * warm-up. Each latency runs from the moment the request was due, so a request that waits for a connection or
 * for a slow answer ahead of it counts that wait (no coordinated omission). autocannon's rate limit is no use
 * here: each connection sends its quota for the second back to back, so half the rate is full load half the time.
 */
export async function drivePaced(baseUrl: string, target: HttpTarget, pace: Pace): Promise<LoadFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: pace.connections });
  try {
    if (pace.warmupSeconds > 0) await sendPaced(baseUrl, target, agent, pace.rate, pace.warmupSeconds);
    const { latencies, failures } = await sendPaced(baseUrl, target, agent, pace.rate, pace.seconds);
    latencies.sort((a, b) => a - b);
    return {
      requestsPerSecond: Math.round(latencies.length / pace.seconds),
      p50Ms: percentile(latencies, 0.5),
      p99Ms: percentile(latencies, 0.99),
      failures,
    };
  } finally {
    agent.destroy();
  }
}

function sendPaced(baseUrl: string, target: HttpTarget, agent: http.Agent, rate: number, seconds: number) {
  const total = Math.round(rate * seconds);
  const outcome: Outcome = { latencies: [], failures: 0 };
  return new Promise<Outcome>((resolve) => {
    const start = performance.now();
    let sent = 0;
    let answered = 0;
    const answer = (dueAt: number, ok: boolean) => {
      if (ok) outcome.latencies.push(performance.now() - dueAt);
      else outcome.failures++;
      if (++answered === total) resolve(outcome);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      for (; sent < due; sent++) {
        const dueAt = start + (sent * 1000) / rate;
        sendOnce(baseUrl, target.method, requestAt(target, sent), agent, (ok) => answer(dueAt, ok));
      }
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
}

/** The `index`th request: the variants taken in turn. */
function requestAt(target: HttpTarget, index: number): RequestParts {
  const { path, headers, body, variants } = target;
  return {
    path,
    headers,
    ...(typeof body === "string" ? { body } : {}),
    ...variants?.[index % variants.length],
    ...partsOf(target),
  };
}

function sendOnce(
  baseUrl: string,
  method: string,
  parts: RequestParts,
  agent: http.Agent,
  done: (ok: boolean) => void,
) {
  const request = http.request(`${baseUrl}${parts.path}`, { method, headers: parts.headers, agent }, (response) => {
    response.resume();
    response.once("end", () => done((response.statusCode ?? 0) < 300));
  });
  request.setNoDelay(true);
  request.once("error", () => done(false));
  request.end(parts.body);
}

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  const value = sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
  return Number(value.toFixed(2));
}
