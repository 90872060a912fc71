import { createHmac } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the receiver got it: headers and the raw body bytes. */
export interface Received {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  envelope: Record<string, unknown> & { type: string; data: Record<string, unknown> };
}

/** How the receiver answers one request; the default answers challenges as the spec asks and everything else 204. */
export type Answer = (received: Received) => { status: number; headers?: Record<string, string>; body?: string };

/** A webhook endpoint on 127.0.0.1 for tests: records what arrives and answers as told. */
export class WebhookReceiver {
  readonly received: Received[] = [];
  /** The subscription's secret, set once known, for signing challenge replies. */
  secret = "";
  answer: Answer = (received) => this.challengeReply(received) ?? { status: 204 };
  /** While set, requests arriving are answered only once it resolves. */
  hold: Promise<void> | undefined;
  private readonly server: http.Server;

  private constructor() {
    this.server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks);
        const received = { headers: request.headers, body, envelope: JSON.parse(body.toString("utf8")) };
        this.received.push(received);
        void (this.hold ?? Promise.resolve()).then(() => {
          const answer = this.answer(received);
          response.writeHead(answer.status, answer.headers ?? {});
          response.end(answer.body ?? "");
        });
      });
    });
  }

  static async start(host = "127.0.0.1", port = 0): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await new Promise<void>((resolve) => receiver.server.listen(port, host, resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = "/hook"): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** The spec's reply to a registration challenge: the echo, signed with the secret; undefined for other events. */
  challengeReply(received: Received) {
    if (received.envelope.type !== "Webhooks.Registration.Challenge") return undefined;
    const body = JSON.stringify({ challenge: received.envelope.data.challenge });
    const id = String(received.headers["webhook-id"]);
    const timestamp = String(received.headers["webhook-timestamp"]);
    return {
      status: 200,
      headers: { "webhook-signature": `v1,${sign(this.secret, id, timestamp, Buffer.from(body))}` },
      body,
    };
  }

  /** Waits until a request satisfying `match` has arrived; answers it. */
  async waitFor(match: (received: Received) => boolean, timeoutMs = 10_000): Promise<Received> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no matching delivery within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Standard Webhooks' v1 signature, computed here independently of the service's code. */
export function sign(secret: string, id: string, timestamp: string, body: Buffer): string {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64");
}
