import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { Logger } from "../platform/logger.js";
import { recordClientAddress } from "./client-address.js";
import { continueOnFirstRead } from "./expect-continue.js";
import { writeRawProblem } from "./http-responses.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";
import { sendWaitingAnswers } from "./turn-end-writes.js";

/** Handles a request; what it answers is called once, when the response closes. */
export type RequestHandler = (request: NodeRequest, response: NodeResponse) => (() => void) | undefined;

export interface ListenOptions {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  logger: Logger;
  /** Peers whose X-Forwarded-For names the client's address. */
  trustedProxies?: (address: string, hop: number) => boolean;
  /** Node's HTTP/1.1 limits; tests shorten them. */
  timeouts?: { headersMs: number; requestMs: number; checkIntervalMs: number };
}

export interface RunningServer {
  port: number;
  /** Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes every connection. */
  close(graceMs: number): Promise<void>;
}

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const FIRST_BYTES_TIMEOUT_MS = 10_000;
/** An HTTP/2 session with no stream activity this long is closed; clients reconnect when they need to. */
const HTTP2_IDLE_TIMEOUT_MS = 120_000;
/**
 * Streams a client may have open at once on one HTTP/2 connection (Node advertises no limit otherwise: one
 * connection could open tens of thousands and hold the event loop for seconds). Clients queue beyond it.
 */
const HTTP2_SETTINGS: http2.Settings = { maxConcurrentStreams: 128 };
/**
 * On close, idle HTTP/1.1 connections stay open this long first: a request already on its way over one (sent just
 * before the signal, or not read yet by a busy event loop) is served, with `Connection: close`, rather than
 * reset unanswered. HTTP/2 sessions are told at once (GOAWAY): streams they open later are refused, safely retried.
 */
const CLOSE_SETTLE_MS = 200;
const HTTP1_TIMEOUTS = { headersMs: 60_000, requestMs: 300_000, checkIntervalMs: 2_000 };

/**
 * One port for everything: HTTP/1.1 and cleartext HTTP/2 (told apart by the HTTP/2 connection preface),
 * or, with TLS, both negotiated by ALPN.
 */
export async function listen(handler: RequestHandler, options: ListenOptions): Promise<RunningServer> {
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  let inFlight = 0;
  let draining = false;
  let drained: (() => void) | undefined;

  const tracked = (request: NodeRequest, response: NodeResponse): void => {
    recordClientAddress(request, options.trustedProxies);
    inFlight++;
    if (draining && "shouldKeepAlive" in response) response.shouldKeepAlive = false;
    const http1Socket = "stream" in request ? undefined : request.socket;
    if (http1Socket) handling.set(http1Socket, request);
    let whenClosed: (() => void) | undefined;
    // One listener per response ("close" is emitted once): once() costs a wrapper each.
    response.on("close", () => {
      if (http1Socket) handling.delete(http1Socket);
      inFlight--;
      whenClosed?.();
      if (draining && inFlight === 0) drained?.();
    });
    whenClosed = handler(request, response);
  };

  const continuing = (request: NodeRequest, response: NodeResponse): void => {
    continueOnFirstRead(request, response);
    tracked(request, response);
  };

  const timeouts = options.timeouts ?? HTTP1_TIMEOUTS;
  const h1 = http.createServer(
    {
      keepAliveTimeout: 5000,
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      connectionsCheckingInterval: timeouts.checkIntervalMs,
      // The handler refuses a missing Host itself, with a body (Node's own 400 has none).
      requireHostHeader: false,
    },
    tracked,
  );
  // h1 never listens (connections are handed to it), and Node starts its header and request timers, and the
  // connection list closeIdleConnections() works from, on "listening".
  h1.emit("listening");
  h1.on("clientError", (error: NodeJS.ErrnoException, socket: net.Socket) =>
    answerClientError(error, socket, options.logger),
  );
  // Node answers an unknown `Expect` with an empty 417 unless asked; the handler answers it with a body.
  h1.on("checkExpectation", tracked);
  h1.on("checkContinue", continuing);
  const h2 = options.tls
    ? http2.createSecureServer(
        {
          cert: fs.readFileSync(options.tls.certFile),
          key: fs.readFileSync(options.tls.keyFile),
          allowHTTP1: true,
          ALPNProtocols: ["h2", "http/1.1"],
          // Node's HTTP/2 turns Nagle off on its sessions' sockets; this covers HTTP/1.1 over TLS too.
          noDelay: true,
          settings: HTTP2_SETTINGS,
        },
        tracked,
      )
    : http2.createServer({ settings: HTTP2_SETTINGS }, tracked);
  h2.setTimeout(HTTP2_IDLE_TIMEOUT_MS);
  h2.on("checkExpectation", tracked);
  h2.on("checkContinue", continuing);
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });

  const front = options.tls
    ? (h2 as net.Server)
    : net.createServer({ noDelay: true }, (socket) => {
        // Until a protocol server owns the socket, its errors and silence are ours to end.
        const drop = () => socket.destroy();
        socket.on("error", drop);
        socket.setTimeout(FIRST_BYTES_TIMEOUT_MS, drop);
        let head = Buffer.alloc(0);
        const sniff = (chunk: Buffer) => {
          head = Buffer.concat([head, chunk]);
          const length = Math.min(head.length, HTTP2_PREFACE.length);
          const matches = head.subarray(0, length).equals(HTTP2_PREFACE.subarray(0, length));
          if (matches && length < HTTP2_PREFACE.length) return;
          socket.off("data", sniff);
          socket.off("error", drop);
          socket.setTimeout(0);
          socket.pause();
          // Put back what was read: HTTP/1.1 parses it from the stream, and a new HTTP/2 session feeds its
          // handle whatever the socket already buffered (nodejs/node#35475) before reading the handle itself.
          socket.unshift(head);
          if (matches) {
            h2.emit("connection", socket);
            return;
          }
          h1.emit("connection", socket);
          socket.resume();
        };
        socket.on("data", sniff);
      });
  front.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(options.port, options.host, () => resolve());
  });
  const address = front.address() as net.AddressInfo;

  return {
    port: address.port,
    async close(graceMs) {
      draining = true;
      const closed = new Promise<void>((resolve) => front.close(() => resolve()));
      for (const session of sessions) session.close();
      const settleMs = Math.min(CLOSE_SETTLE_MS, graceMs);
      if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
      h1.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => {
            drained = resolve;
          }),
          new Promise<void>((resolve) => setTimeout(resolve, graceMs - settleMs).unref()),
        ]);
      }
      h1.closeAllConnections();
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

const CLIENT_ERRORS: Record<string, { status: number; slug: string; detail: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, slug: "headers-too-large", detail: "the request headers are too large" },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, slug: "request-timeout", detail: "the request took too long to arrive" },
  HPE_HEADERS_TIMEOUT: { status: 408, slug: "request-timeout", detail: "the request headers took too long to arrive" },
};
const MALFORMED = { status: 400, slug: "malformed-request", detail: "the request is not valid HTTP/1.1" };

/** The status the server answered on a connection itself, cutting the request under way there. */
const answeredOnConnection = new WeakMap<net.Socket, number>();
/** HTTP/1.1 connections whose current request a handler is serving (and will log), with that request. */
const handling = new WeakMap<net.Socket, NodeRequest>();

/** For a request's log line: the status the server cut it with (a body too slow to arrive), if it did. */
export function statusAnsweredOn(socket: net.Socket | null | undefined): number | undefined {
  return socket ? answeredOnConnection.get(socket) : undefined;
}

/**
 * Answers a request Node's HTTP/1.1 parser refused with a problem record, then closes the connection. A request
 * whose handler runs (its body too slow: 408) is logged by the handler with that status; one refused before
 * its headers were read is logged here, having no request line of its own.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: net.Socket, logger: Logger): void {
  // An answer made on this connection and waiting for the turn's end goes first, then the connection is cut.
  sendWaitingAnswers();
  if (error.code === "ECONNRESET" || !socket.writable || socket.bytesWritten > 0) {
    socket.destroy();
    return;
  }
  const { status, slug, detail } = CLIENT_ERRORS[error.code ?? ""] ?? MALFORMED;
  answeredOnConnection.set(socket, status);
  const cut = handling.get(socket);
  if (!cut) {
    logger.info({ status, problem: slug, remoteAddress: socket.remoteAddress }, "request refused before it was read");
  }
  const requestId = cut?.headers["x-request-id"];
  writeRawProblem(socket, status, slug, detail, typeof requestId === "string" ? requestId : undefined);
}
