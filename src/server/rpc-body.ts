import type { NodeRequest } from "./rest/rest-handler.js";

/** A request body read to its end, or the part read before it grew past the limit (the rest is unread). */
export type ReadBody = { complete: true; bytes: Buffer } | { complete: false; chunks: Buffer[] };

/**
 * Reads a request body of at most `limit` bytes. Past the limit it stops, pauses the request and answers what
 * it read; undefined when the client went away first.
 */
export function readBody(request: NodeRequest, limit: number): Promise<ReadBody | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const finish = (body: ReadBody | undefined) => {
      request.off("data", onData);
      request.off("end", onEnd);
      request.off("close", onClose);
      request.off("error", onClose);
      resolve(body);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length <= limit) return;
      request.pause();
      finish({ complete: false, chunks });
    };
    const onEnd = () => finish({ complete: true, bytes: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks) });
    const onClose = () => finish(undefined);
    request.on("data", onData);
    request.once("end", onEnd);
    request.once("close", onClose);
    request.once("error", onClose);
  });
}

/** The body as connect-node reads it: what was read already, then the rest of the request. */
export async function* replayBody(body: ReadBody, request: NodeRequest): AsyncGenerator<Uint8Array> {
  if (body.complete) {
    yield body.bytes;
    return;
  }
  yield* body.chunks;
  for await (const chunk of request) yield chunk as Buffer;
}
