import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { Logger } from "../platform/logger.js";
import { ReplaySocket } from "./replay-socket.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";

export type RequestHandler = (request: NodeRequest, response: NodeResponse) => void;

export interface ListenOptions {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  logger: Logger;
}

export interface RunningServer {
  port: number;
  /** Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes every connection. */
  close(graceMs: number): Promise<void>;
}

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const FIRST_BYTE_TIMEOUT_MS = 10_000;

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

  const tracked: RequestHandler = (request, response) => {
    inFlight++;
    if (draining && "shouldKeepAlive" in response) response.shouldKeepAlive = false;
    response.once("close", () => {
      inFlight--;
      if (draining && inFlight === 0) drained?.();
    });
    handler(request, response);
  };

  const h1 = http.createServer({ keepAliveTimeout: 5000 }, tracked);
  const h2 = options.tls
    ? http2.createSecureServer(
        {
          cert: fs.readFileSync(options.tls.certFile),
          key: fs.readFileSync(options.tls.keyFile),
          allowHTTP1: true,
          ALPNProtocols: ["h2", "http/1.1"],
        },
        tracked,
      )
    : http2.createServer({}, tracked);
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });

  const front = options.tls
    ? (h2 as net.Server)
    : net.createServer((socket) => {
        // Until a protocol server owns the socket, its errors and silence are ours to end.
        const drop = () => socket.destroy();
        socket.on("error", drop);
        socket.setTimeout(FIRST_BYTE_TIMEOUT_MS, drop);
        socket.once("data", (chunk: Buffer) => {
          socket.off("error", drop);
          socket.setTimeout(0);
          socket.pause();
          const length = Math.min(chunk.length, HTTP2_PREFACE.length);
          if (chunk.subarray(0, length).equals(HTTP2_PREFACE.subarray(0, length))) {
            h2.emit("connection", new ReplaySocket(socket, chunk));
            return;
          }
          socket.unshift(chunk);
          h1.emit("connection", socket);
          socket.resume();
        });
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
      h1.closeIdleConnections();
      for (const session of sessions) session.close();
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => {
            drained = resolve;
          }),
          new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref()),
        ]);
      }
      h1.closeAllConnections();
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
