import http from "node:http";
import http2 from "node:http2";
import type { HttpTarget } from "./http-load.js";

/** A response as the bare server replays it; the body in base64. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface GrpcReply {
  headers: Record<string, string>;
  body: string;
  trailers: Record<string, string>;
}

/** Headers each server writes for itself (per connection or per response), left out of the replay. */
const OWN_HEADERS = new Set(["date", "connection", "keep-alive", "content-length", "transfer-encoding"]);

/** Sends `target` once over HTTP/1.1 and records the answer: status, headers and exact body bytes. */
export function recordHttp(baseUrl: string, target: HttpTarget): Promise<Reply> {
  const body = typeof target.body === "function" ? target.body() : target.body;
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${baseUrl}${target.path}`,
      { method: target.method, headers: target.headers, agent: false },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.once("end", () => {
          const status = response.statusCode ?? 0;
          const bytes = Buffer.concat(chunks);
          if (status >= 300) {
            reject(new Error(`${target.name} answered ${status}: ${bytes.toString("utf8")}`));
            return;
          }
          const headers = Object.fromEntries(
            Object.entries(response.headers).filter(([name]) => !OWN_HEADERS.has(name)),
          ) as Record<string, string>;
          resolve({ status, headers, body: bytes.toString("base64") });
        });
      },
    );
    request.once("error", reject);
    request.end(body);
  });
}

/** Makes one gRPC call over h2c with node:http2 and records the response headers, message bytes and trailers. */
export function recordGrpc(baseUrl: string, path: string, message: Uint8Array, authorization: string) {
  return new Promise<GrpcReply>((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.once("error", reject);
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      authorization,
    });
    let headers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    stream.once("response", (received) => {
      headers = withoutPseudo(received);
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("trailers", (trailers) => {
      session.close();
      const status = trailers["grpc-status"];
      if (status !== "0") reject(new Error(`${path} answered grpc-status ${status}: ${trailers["grpc-message"]}`));
      resolve({ headers, body: Buffer.concat(chunks).toString("base64"), trailers: withoutPseudo(trailers) });
    });
    stream.once("error", reject);
    stream.end(grpcFrame(message));
  });
}

/** A length-prefixed gRPC message, uncompressed. */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

function withoutPseudo(headers: http2.IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !name.startsWith(":") && !OWN_HEADERS.has(name)),
  ) as Record<string, string>;
}
