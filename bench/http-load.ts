import autocannon from "autocannon";

/** What may change from one request to the next: another session's path and token, a fresh body. */
export interface RequestParts {
  path?: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * One benchmarked HTTP/1.1 request; `body` may make a fresh body per request (e.g. a unique productCode), and
 * `next` any part of it (e.g. the next session's path and Authorization, round-robin over all connections).
 * Both cost the load generator a request built per request; `variants` are built once, and each connection
 * sends them in turn (so connections may send the same variant at the same time).
 */
export interface HttpTarget {
  name: string;
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: string | (() => string);
  next?: () => RequestParts;
  variants?: RequestParts[];
  /** Sees every answer (its body collected for it), e.g. to check what it says. */
  onResponse?: (status: number, body: string) => void;
}

export interface LoadFigures {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers that were not 2xx, plus connection errors: any makes the figures meaningless. */
  failures: number;
}

export interface LoadOptions {
  connections: number;
  seconds: number;
  warmupSeconds: number;
}

/** Drives `baseUrl` with autocannon: `connections` keep-alive connections for `seconds`, after a warm-up. */
export async function driveHttp(baseUrl: string, target: HttpTarget, options: LoadOptions): Promise<LoadFigures> {
  if (options.warmupSeconds > 0) await run(baseUrl, target, options, options.warmupSeconds);
  const result = await run(baseUrl, target, options, options.seconds);
  return {
    requestsPerSecond: Math.round(result["2xx"] / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    failures: result.non2xx + result.errors,
  };
}

function run(baseUrl: string, target: HttpTarget, { connections }: LoadOptions, seconds: number) {
  const { body, next, variants = [{}], onResponse } = target;
  const requests = variants.map(
    (variant): autocannon.Request => ({
      method: target.method,
      path: target.path,
      headers: target.headers,
      ...(typeof body === "string" ? { body } : {}),
      ...variant,
      ...(typeof body === "function" || next ? { setupRequest: (sent) => ({ ...sent, ...partsOf(target) }) } : {}),
      ...(onResponse ? { onResponse: (status: number, text: string) => onResponse(status, text) } : {}),
    }),
  );
  return autocannon({ url: baseUrl, connections, duration: seconds, requests });
}

/** What `next` and a fresh `body` make of the next request (not `variants`: each connection has its turn). */
export function partsOf({ body, next }: HttpTarget): RequestParts {
  return { ...(typeof body === "function" ? { body: body() } : {}), ...next?.() };
}
