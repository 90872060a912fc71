import { randomInt } from "node:crypto";
import http from "node:http";

/** A loopback address of a test's own (all of 127.0.0.0/8 reaches a loopback listener): its own rate-limit keys. */
export function ownLoopbackAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export interface ResponseFrom {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** POSTs `body` as JSON to `baseUrl` + `path` over a connection from `localAddress`; the body answered, parsed. */
export function postJsonFrom(
  baseUrl: string,
  path: string,
  body: unknown,
  localAddress: string,
): Promise<ResponseFrom> {
  const text = JSON.stringify(body);
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: "POST",
        localAddress,
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          const raw = Buffer.concat(chunks).toString();
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: raw ? JSON.parse(raw) : null });
        });
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(text);
  });
}
