import type net from "node:net";

const HEAD_END = Buffer.from("\r\n\r\n");
const LINE_END = Buffer.from("\r\n");

/**
 * Frames the HTTP/1.1 answers arriving on a keep-alive socket, one request in flight at a time: finds each
 * answer's end (Content-Length or chunked) without parsing more than its status and framing headers, and calls
 * `answered` with the request's index and whether it was a 2xx. A socket that fails or closes fails its request.
 */
export class HttpAnswerReader {
  private buffered: Buffer = Buffer.alloc(0);
  private index: number | undefined;
  private readonly onData = (chunk: Buffer) => this.read(chunk);
  private readonly onEnd = () => this.fail();

  constructor(
    private readonly socket: net.Socket,
    private readonly answered: (index: number, ok: boolean) => void,
  ) {
    socket.on("data", this.onData);
    socket.on("error", this.onEnd);
    socket.on("close", this.onEnd);
  }

  /** The request now sent on the socket; failed at once when the socket is gone (nothing will answer it). */
  expect(index: number): void {
    this.index = index;
    if (this.socket.destroyed) queueMicrotask(() => this.fail());
  }

  detach(): void {
    this.socket.off("data", this.onData);
    this.socket.off("error", this.onEnd);
    this.socket.off("close", this.onEnd);
  }

  private read(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    for (let end = answerEnd(this.buffered); end !== undefined; end = answerEnd(this.buffered)) {
      const ok = this.buffered[9] === 0x32; // "HTTP/1.1 2xx"
      this.buffered = this.buffered.subarray(end);
      this.finish(ok);
    }
  }

  private fail(): void {
    this.finish(false);
  }

  private finish(ok: boolean): void {
    const index = this.index;
    if (index === undefined) return;
    this.index = undefined;
    this.answered(index, ok);
  }
}

/** Where the first complete answer in `bytes` ends; undefined while it is incomplete. */
function answerEnd(bytes: Buffer): number | undefined {
  const headEnd = bytes.indexOf(HEAD_END);
  if (headEnd < 0) return undefined;
  const head = bytes.toString("latin1", 0, headEnd).toLowerCase();
  const bodyStart = headEnd + HEAD_END.length;
  const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
  if (length) {
    const end = bodyStart + Number(length[1]);
    return end <= bytes.length ? end : undefined;
  }
  if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) return chunkedEnd(bytes, bodyStart);
  return bodyStart;
}

/** The end of a chunked body starting at `start` (no trailers); undefined while it is incomplete. */
function chunkedEnd(bytes: Buffer, start: number): number | undefined {
  let at = start;
  for (;;) {
    const lineEnd = bytes.indexOf(LINE_END, at);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(bytes.toString("latin1", at, lineEnd), 16);
    const dataEnd = lineEnd + LINE_END.length + size + LINE_END.length;
    if (dataEnd > bytes.length) return undefined;
    if (size === 0) return dataEnd;
    at = dataEnd;
  }
}
