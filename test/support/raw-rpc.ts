import { once } from "node:events";
import http from "node:http";
import http2 from "node:http2";

/** One RPC exchange as it went over the wire: what the server sent, byte for byte, less its date and request id. */
export interface Exchange {
  status: number;
  headers: Record<string, string | string[]>;
  /** The response body, base64. */
  body: string;
  trailers: Record<string, string | string[]>;
}

const VOLATILE = new Set(["date", "x-request-id", ":status"]);

function stable(headers: http.IncomingHttpHeaders | http2.IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!VOLATILE.has(name) && value !== undefined) kept[name] = value as string | string[];
  }
  return kept;
}

/** A POST over HTTP/1.1 (node:http, so nothing is decompressed or normalized on the way). */
export async function http1Exchange(
  baseUrl: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<Exchange> {
  const request = http.request(new URL(path, baseUrl), {
    method: "POST",
    headers: { ...headers, "content-length": String(body.length) },
  });
  request.end(body);
  const [response] = (await once(request, "response")) as [http.IncomingMessage];
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return {
    status: response.statusCode ?? 0,
    headers: stable(response.headers),
    body: Buffer.concat(chunks).toString("base64"),
    trailers: stable(response.trailers),
  };
}

/** A POST on a stream of a new HTTP/2 cleartext connection: headers, data and trailers as the server sent them. */
export async function http2Exchange(
  baseUrl: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<Exchange> {
  const session = http2.connect(baseUrl);
  try {
    const stream = session.request({ ":method": "POST", ":path": path, ...headers });
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    stream.on("response", (received) => {
      responseHeaders = received;
    });
    stream.on("trailers", (received) => {
      trailers = received;
    });
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.end(body);
    await once(stream, "close");
    return {
      status: Number(responseHeaders[":status"]),
      headers: stable(responseHeaders),
      body: Buffer.concat(chunks).toString("base64"),
      trailers: stable(trailers),
    };
  } finally {
    session.close();
  }
}

/** A gRPC length-prefixed message: flags (1 = compressed), big-endian length, data. */
export function envelope(data: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}
