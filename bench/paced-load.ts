import net from "node:net";
import { HttpAnswerReader } from "./http-answer-reader.js";
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
 * Requests go as bytes built once per variant over plain sockets, and answers are only framed, not parsed: with
 * node:http's client this process spent about 60 µs a request, so at the check-in row's pace it was itself the
 * queue its latencies measured (the bare server's p99 was 5–6 ms).
 */
export async function drivePaced(baseUrl: string, target: HttpTarget, pace: Pace): Promise<LoadFigures> {
  const { hostname, port } = new URL(baseUrl);
  const sockets = await Promise.all(Array.from({ length: pace.connections }, () => connect(hostname, Number(port))));
  const requests = new RequestBytes(target, hostname, port);
  try {
    if (pace.warmupSeconds > 0) await sendPaced(sockets, requests, pace.rate, pace.warmupSeconds);
    const { latencies, failures } = await sendPaced(sockets, requests, pace.rate, pace.seconds);
    latencies.sort((a, b) => a - b);
    return {
      requestsPerSecond: Math.round(latencies.length / pace.seconds),
      p50Ms: percentile(latencies, 0.5),
      p99Ms: percentile(latencies, 0.99),
      failures,
    };
  } finally {
    for (const socket of sockets) socket.destroy();
  }
}

function connect(host: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, noDelay: true }, () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/** The `index`th request as bytes: the variants (built once) taken in turn, or a fresh body / `next` part. */
class RequestBytes {
  private readonly built: Buffer[];

  constructor(
    private readonly target: HttpTarget,
    private readonly hostname: string,
    private readonly port: string,
  ) {
    this.built = (target.variants ?? [{}]).map((variant) => this.bytesOf({ ...this.common(), ...variant }));
  }

  at(index: number): Buffer {
    const { body, next, variants } = this.target;
    if (typeof body !== "function" && !next) return this.built[index % this.built.length];
    return this.bytesOf({ ...this.common(), ...variants?.[index % variants.length], ...partsOf(this.target) });
  }

  private common(): RequestParts {
    const { path, headers, body } = this.target;
    return { path, headers, ...(typeof body === "string" ? { body } : {}) };
  }

  private bytesOf({ path, headers = {}, body = "" }: RequestParts): Buffer {
    const lines = [`${this.target.method} ${path} HTTP/1.1`, `host: ${this.hostname}:${this.port}`];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    if (body !== "" || this.target.method !== "GET") lines.push(`content-length: ${Buffer.byteLength(body)}`);
    return Buffer.from(`${lines.join("\r\n")}\r\n\r\n${body}`);
  }
}

/**
 * One request at a time on each connection (no pipelining): a request due while every connection waits for an
 * answer queues, and its wait counts in its latency.
 */
function sendPaced(sockets: net.Socket[], requests: RequestBytes, rate: number, seconds: number) {
  const total = Math.round(rate * seconds);
  const outcome: Outcome = { latencies: [], failures: 0 };
  return new Promise<Outcome>((resolve) => {
    const start = performance.now();
    const idle = [...sockets];
    const queued: number[] = [];
    let nextQueued = 0;
    let sent = 0;
    let answered = 0;
    const dueAt = (index: number) => start + (index * 1000) / rate;
    const send = (socket: net.Socket, index: number) => {
      readers.get(socket)?.expect(index);
      socket.write(requests.at(index));
    };
    const readers = new Map(
      sockets.map((socket) => [
        socket,
        new HttpAnswerReader(socket, (index, ok) => {
          if (ok) outcome.latencies.push(performance.now() - dueAt(index));
          else outcome.failures++;
          const waiting = nextQueued < queued.length ? queued[nextQueued++] : undefined;
          if (waiting === undefined) idle.push(socket);
          else send(socket, waiting);
          if (++answered === total) {
            for (const reader of readers.values()) reader.detach();
            resolve(outcome);
          }
        }),
      ]),
    );
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      for (; sent < due; sent++) {
        const socket = idle.pop();
        if (socket) send(socket, sent);
        else queued.push(sent);
      }
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
}

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  const value = sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
  return Number(value.toFixed(2));
}
