import net from "node:net";

/** A raw HTTP/1.1 connection to a local server, for tests of what happens on the connection itself. */
export class RawConnection {
  private received = "";
  private ended = false;
  private readonly waiters = new Set<() => void>();

  private constructor(private readonly socket: net.Socket) {
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      this.received += chunk;
      this.wake();
    });
    socket.on("close", () => {
      this.ended = true;
      this.wake();
    });
    socket.on("error", () => undefined);
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  write(text: string): void {
    if (!this.socket.destroyed) this.socket.write(text);
  }

  /** Every response head and body received so far, split at status lines. */
  responses(): string[] {
    return this.received.split(/(?=HTTP\/1\.1 \d{3} )/).filter(Boolean);
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Resolves once `ready()` holds; rejects after `timeoutMs` (a hung connection). */
  until(ready: () => boolean, timeoutMs = 5000): Promise<void> {
    if (ready()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`the connection hung; received so far: ${JSON.stringify(this.received.slice(0, 500))}`));
      }, timeoutMs);
      const check = () => {
        if (!ready()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

/** True once `text` holds a whole response whose body length its Content-Length gives. */
export function isCompleteResponse(text: string | undefined): boolean {
  if (!text) return false;
  const headEnd = text.indexOf("\r\n\r\n");
  if (headEnd < 0) return false;
  const length = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, headEnd));
  return length !== null && text.length - headEnd - 4 >= Number(length[1]);
}

export interface ParsedResponse {
  statusLine: string;
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
  /** Bytes after the body the Content-Length announced (after the head for HEAD responses). */
  rest: string;
}

/**
 * The first response of `text`, or undefined while its head has not all arrived; `head` for a response to HEAD,
 * which has no body whatever Content-Length says. Without Content-Length the body is all that follows the head.
 */
export function parseHttpResponse(text: string, { head = false } = {}): ParsedResponse | undefined {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const after = text.slice(end + 4);
  const length = head ? 0 : Number(headers["content-length"] ?? after.length);
  return {
    statusLine,
    status: Number(statusLine.split(" ")[1]),
    headers,
    body: after.slice(0, length),
    rest: after.slice(length),
  };
}
