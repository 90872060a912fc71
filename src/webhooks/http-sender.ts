import http from "node:http";
import https from "node:https";
import net from "node:net";
import { performance } from "node:perf_hooks";
import type { WebhookTarget } from "./target-policy.js";

/** One POST of a webhook to an address that passed the target checks. */
export interface WebhookRequest {
  target: WebhookTarget;
  /** The checked IP address to connect to (safe-resolve.ts); the name is not resolved again. */
  address: string;
  headers: Record<string, string>;
  /** The exact bytes that were signed. */
  body: Buffer;
  /** For everything: connect, TLS, request, response headers and body (and `spentMs` before them). */
  timeoutMs: number;
  /** What the attempt spent before sending (resolving the host): counted in its time limit and its duration. */
  spentMs?: number;
}

export type WebhookResponse =
  | {
      status: number;
      headers: http.IncomingHttpHeaders;
      /** The first RESPONSE_BODY_KEPT bytes. */
      body: Buffer;
      /** The response body was longer than what is kept. */
      truncated: boolean;
      durationMs: number;
    }
  | { error: string; durationMs: number };

/** Keep-alive connection pools; their keys hold the address connected to, so a pooled socket never changes it. */
export interface WebhookAgents {
  http: http.Agent;
  https: https.Agent;
}

export const RESPONSE_BODY_KEPT = 4096;
/** Reading stops here and the connection is closed: a receiver cannot make us read a large body. */
export const RESPONSE_BODY_READ = 65_536;

/** Pools for webhook deliveries; `tls` options (a test CA) apply to every https connection. */
export function createWebhookAgents(tls: https.AgentOptions = {}): WebhookAgents {
  return {
    http: new http.Agent({ keepAlive: true }),
    https: new https.Agent({ ...tls, keepAlive: true }),
  };
}

export function destroyWebhookAgents(agents: WebhookAgents): void {
  agents.http.destroy();
  agents.https.destroy();
}

const sharedAgents = createWebhookAgents();

/**
 * POSTs the body to the target's URL at the checked address: Host header and TLS server name (SNI and
 * certificate check) are the URL's. Redirects are not followed. Never rejects: failures answer `error`.
 */
export function sendWebhook(request: WebhookRequest, agents: WebhookAgents = sharedAgents): Promise<WebhookResponse> {
  const started = performance.now() - (request.spentMs ?? 0);
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const settle = (response: WebhookResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(response);
    };
    const fail = (error: Error) => settle({ error: errorText(error, request.timeoutMs), durationMs: elapsed() });
    const outgoing = startRequest(request, agents);
    const timer = setTimeout(
      () => {
        fail(new TimeoutError());
        outgoing.destroy();
      },
      request.timeoutMs - (request.spentMs ?? 0),
    );
    outgoing.on("error", fail);
    outgoing.on("response", (response) => {
      readBody(response, (body, truncated) => {
        settle({ status: response.statusCode ?? 0, headers: response.headers, body, truncated, durationMs: elapsed() });
      });
      response.on("error", fail);
      response.on("aborted", () => fail(new Error("response aborted")));
    });
    outgoing.end(request.body);
  });
}

function startRequest({ target, address, headers, body }: WebhookRequest, agents: WebhookAgents): http.ClientRequest {
  const { url, hostname, port } = target;
  const options: https.RequestOptions = {
    method: "POST",
    host: address,
    port,
    path: `${url.pathname}${url.search}`,
    headers: { ...headers, host: url.host, "content-length": String(body.length) },
  };
  if (url.protocol === "http:") return http.request({ ...options, agent: agents.http });
  // SNI carries names only (RFC 6066); for an IP literal the certificate is checked against the address.
  const servername = net.isIP(hostname) ? undefined : hostname;
  return https.request({ ...options, servername, agent: agents.https });
}

/** Reads up to RESPONSE_BODY_READ bytes, keeping the first RESPONSE_BODY_KEPT; closes the connection past it. */
function readBody(response: http.IncomingMessage, done: (body: Buffer, truncated: boolean) => void): void {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let readBytes = 0;
  const finish = () => done(Buffer.concat(kept, keptBytes), readBytes > RESPONSE_BODY_KEPT);
  // done() may run twice (limit reached, then end); sendWebhook settles once.
  response.on("data", (chunk: Buffer) => {
    readBytes += chunk.length;
    if (keptBytes < RESPONSE_BODY_KEPT) {
      const part = chunk.subarray(0, RESPONSE_BODY_KEPT - keptBytes);
      kept.push(part);
      keptBytes += part.length;
    }
    if (readBytes > RESPONSE_BODY_READ) {
      finish();
      response.destroy();
    }
  });
  response.on("end", finish);
}

class TimeoutError extends Error {}

const ERROR_TEXTS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  EPIPE: "connection reset",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ETIMEDOUT: "connect time-out",
  EADDRNOTAVAIL: "address not available",
};

/** A short, stable description of why an attempt got no response, for the attempt's `error`. */
function errorText(error: NodeJS.ErrnoException, timeoutMs: number): string {
  if (error instanceof TimeoutError) return timeoutText(timeoutMs);
  const code = error.code ?? "";
  if (ERROR_TEXTS[code]) return ERROR_TEXTS[code];
  if (code.startsWith("HPE_")) return `invalid http response (${code})`;
  if (code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_") || /CERT|SELF_SIGNED|UNABLE_TO/.test(code)) {
    return `tls: ${code}`;
  }
  return `${code ? `${code}: ` : ""}${error.message}`.slice(0, 500);
}

/** An attempt's `error` when its time limit ran out. */
export function timeoutText(timeoutMs: number): string {
  return `time-out after ${timeoutMs} ms`;
}
