import autocannon from "autocannon";

/** One benchmarked HTTP/1.1 request; `body` may make a fresh body per request (e.g. a unique productCode). */
export interface HttpTarget {
  name: string;
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: string | (() => string);
}

export interface LoadFigures {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers that were not 2xx, plus connection errors: any makes the figures meaningless. */
  failures: number;
}

/** Drives `baseUrl` with autocannon: `connections` keep-alive connections for `seconds`, after a warm-up. */
export async function driveHttp(
  baseUrl: string,
  target: HttpTarget,
  { connections, seconds, warmupSeconds }: { connections: number; seconds: number; warmupSeconds: number },
): Promise<LoadFigures> {
  if (warmupSeconds > 0) await run(baseUrl, target, connections, warmupSeconds);
  const result = await run(baseUrl, target, connections, seconds);
  return {
    requestsPerSecond: Math.round(result["2xx"] / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    failures: result.non2xx + result.errors,
  };
}

function run(baseUrl: string, target: HttpTarget, connections: number, seconds: number) {
  const { body } = target;
  const request: autocannon.Request = {
    method: target.method,
    path: target.path,
    headers: target.headers,
    ...(typeof body === "string" ? { body } : {}),
    ...(typeof body === "function" ? { setupRequest: (sent: autocannon.Request) => ({ ...sent, body: body() }) } : {}),
  };
  return autocannon({ url: baseUrl, connections, duration: seconds, requests: [request] });
}
