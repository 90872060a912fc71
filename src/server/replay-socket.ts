import type net from "node:net";
import { Duplex } from "node:stream";

/**
 * A socket whose first bytes were already read (to sniff the protocol), replayed in front of the rest.
 * Node's HTTP/2 reads a net.Socket's handle directly and would miss bytes put back with `unshift`; given a
 * generic Duplex it reads through the stream instead.
 */
export class ReplaySocket extends Duplex {
  constructor(
    private readonly socket: net.Socket,
    head: Buffer,
  ) {
    super();
    this.push(head);
    socket.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.once("end", () => this.push(null));
    socket.once("error", (error) => this.destroy(error));
    socket.once("close", () => this.destroy());
  }

  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }

  /** Node's HTTP/2 turns Nagle's algorithm off through this: a generic Duplex would leave it on. */
  setNoDelay(noDelay = true): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.socket.write(chunk, encoding, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.socket.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy(error ?? undefined);
    callback(error);
  }
}
