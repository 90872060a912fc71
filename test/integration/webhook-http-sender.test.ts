import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import test from "ava";
import {
  createWebhookAgents,
  destroyWebhookAgents,
  RESPONSE_BODY_KEPT,
  sendWebhook,
  type WebhookAgents,
  type WebhookResponse,
} from "../../src/webhooks/http-sender.js";
import { type HostLookup, resolveTarget } from "../../src/webhooks/safe-resolve.js";
import {
  checkWebhookUrl,
  isRefusal,
  parseTrustedTargets,
  type TargetRefusal,
  type TrustedTargets,
  type WebhookTarget,
} from "../../src/webhooks/target-policy.js";
import { postToTarget } from "../../src/webhooks/webhook-transport.js";
import { pollUntil } from "../support/poll.js";
import { createSelfSignedCert } from "../support/tls-cert.js";

// Every receiver listens on a loopback address, and every target resolves (through a fake lookup or as a
// literal) to loopback: no traffic leaves the machine, and refusals are proven on 127.0.0.2 listeners.

const BODY = Buffer.from('{"specversion":"1.0","id":"evt-1","data":{"é":"ü"}}');
const HEADERS = { "content-type": "application/cloudevents+json; charset=utf-8", "webhook-id": "evt-1" };
const ONLY_127_0_0_1 = parseTrustedTargets("127.0.0.1");

interface Recorded {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  servername?: string;
}

interface Receiver {
  port: number;
  connections: number;
  requests: Recorded[];
  close(): Promise<void>;
}

type Answer = (request: http.IncomingMessage, response: http.ServerResponse) => void;

/** A receiver on `host` that records each request (after reading its body) and answers with `answer`. */
async function startReceiver(
  host: string,
  answer: Answer,
  { port = 0, tls }: { port?: number; tls?: https.ServerOptions } = {},
): Promise<Receiver> {
  const requests: Recorded[] = [];
  const handler: http.RequestListener = (request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const servername = (request.socket as { servername?: string }).servername;
      requests.push({ headers: request.headers, body: Buffer.concat(chunks), servername });
      answer(request, response);
    });
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  const receiver: Receiver = {
    port: 0,
    connections: 0,
    requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  server.on(tls ? "secureConnection" : "connection", () => receiver.connections++);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  receiver.port = (server.address() as AddressInfo).port;
  return receiver;
}

function answerWith(status: number, body: Buffer | string = "", headers: http.OutgoingHttpHeaders = {}): Answer {
  return (_request, response) => {
    response.writeHead(status, headers);
    response.end(body);
  };
}

const hang: Answer = () => {};

function targetOf(url: string, trusted: TrustedTargets): WebhookTarget {
  const target = checkWebhookUrl(url, trusted);
  if (isRefusal(target)) throw new Error(`${url} refused: ${target.refusal}`);
  return target;
}

/** Sends to a checked target at `address` (as the worker does after resolving). */
function post(url: string, address: string, agents: WebhookAgents, timeoutMs = 2000, trusted = ONLY_127_0_0_1) {
  return sendWebhook({ target: targetOf(url, trusted), address, headers: HEADERS, body: BODY, timeoutMs }, agents);
}

/** The delivery path: URL rules, one resolution with every address checked, then a POST to that address. */
async function deliver(
  url: string,
  trusted: TrustedTargets,
  lookup: HostLookup,
  agents: WebhookAgents,
): Promise<WebhookResponse | TargetRefusal> {
  const target = checkWebhookUrl(url, trusted);
  if (isRefusal(target)) return target;
  const resolved = await resolveTarget(target, trusted, lookup);
  if (isRefusal(resolved)) return resolved;
  return sendWebhook({ target, address: resolved.address, headers: HEADERS, body: BODY, timeoutMs: 2000 }, agents);
}

function responseOf(result: WebhookResponse | TargetRefusal): Extract<WebhookResponse, { status: number }> {
  if ("status" in result) return result;
  throw new Error(`no response: ${JSON.stringify(result)}`);
}

const noDns: HostLookup = async (hostname) => {
  throw new Error(`unexpected lookup of ${hostname}`);
};

test("a 2xx: the exact body and headers arrive, Host is the URL's, a long answer is cut to 4,096 bytes", async (t) => {
  const answer = Buffer.alloc(10_000, "a");
  answer.write("first bytes");
  const receiver = await startReceiver("127.0.0.1", answerWith(200, answer, { "x-answer": "yes" }));
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => receiver.close());

  const result = responseOf(await post(`http://127.0.0.1:${receiver.port}/hooks/in?x=1`, "127.0.0.1", agents));
  t.is(result.status, 200);
  t.is(result.headers["x-answer"], "yes");
  t.true(result.truncated);
  t.is(result.body.length, RESPONSE_BODY_KEPT);
  t.deepEqual(result.body, answer.subarray(0, RESPONSE_BODY_KEPT));
  t.true(result.durationMs >= 0 && result.durationMs < 2000);

  const [received] = receiver.requests;
  t.deepEqual(received.body, BODY);
  t.is(received.headers.host, `127.0.0.1:${receiver.port}`);
  t.is(received.headers["content-length"], String(BODY.length));
  t.is(received.headers["content-type"], HEADERS["content-type"]);
  t.is(received.headers["webhook-id"], "evt-1");

  const second = responseOf(await post(`http://127.0.0.1:${receiver.port}/hooks/in`, "127.0.0.1", agents));
  t.is(second.status, 200);
  t.is(receiver.connections, 1, "a body read to its end leaves the connection in the keep-alive pool");
});

test("a short answer is kept whole, not marked truncated", async (t) => {
  const receiver = await startReceiver("127.0.0.1", answerWith(204));
  const other = await startReceiver("127.0.0.1", answerWith(400, '{"error":"bad"}'));
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([receiver.close(), other.close()]));

  const empty = responseOf(await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents));
  t.is(empty.status, 204);
  t.false(empty.truncated);
  t.is(empty.body.length, 0);
  const refused = responseOf(await post(`http://127.0.0.1:${other.port}/`, "127.0.0.1", agents));
  t.is(refused.status, 400);
  t.false(refused.truncated);
  t.is(refused.body.toString(), '{"error":"bad"}');
});

test("an endless answer is read to 64 KB at most, then the connection is closed", async (t) => {
  const chunk = Buffer.alloc(16 * 1024, "b");
  let sent = 0;
  let closed = false;
  const receiver = await startReceiver("127.0.0.1", (_request, response) => {
    response.writeHead(200, { "content-length": 1024 * 1024 * 1024 });
    const drip = setInterval(() => {
      response.write(chunk);
      sent += chunk.length;
    }, 10);
    response.on("close", () => {
      clearInterval(drip);
      closed = true;
    });
  });
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => receiver.close());

  const result = responseOf(await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents, 5000));
  t.is(result.status, 200);
  t.true(result.truncated);
  t.deepEqual(result.body, chunk.subarray(0, RESPONSE_BODY_KEPT));
  await pollUntil("the receiver's connection to close", () => (closed ? true : undefined));
  t.true(sent < 1024 * 1024, `${sent} bytes sent before the connection was closed`);
  t.true(result.durationMs < 2000, `${result.durationMs} ms`);
  await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents, 5000);
  t.is(receiver.connections, 2, "the cut connection is not reused");
});

test("a redirect is answered as it is, never followed", async (t) => {
  const elsewhere = await startReceiver("127.0.0.1", answerWith(200));
  const receiver = await startReceiver(
    "127.0.0.1",
    answerWith(302, "moved", { location: `http://127.0.0.1:${elsewhere.port}/` }),
  );
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([receiver.close(), elsewhere.close()]));

  const result = responseOf(await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents));
  t.is(result.status, 302);
  t.is(result.headers.location, `http://127.0.0.1:${elsewhere.port}/`);
  t.is(result.body.toString(), "moved");
  await delay(100);
  t.is(elsewhere.connections, 0);
});

test("a receiver that never answers: a time-out error after timeoutMs", async (t) => {
  const receiver = await startReceiver("127.0.0.1", hang);
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => receiver.close());

  const result = await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents, 300);
  t.false("status" in result);
  t.like(result, { error: "time-out after 300 ms" });
  t.true(result.durationMs >= 290 && result.durationMs < 1500, `${result.durationMs} ms`);
  t.is(receiver.requests.length, 1, "the request did arrive");
});

/** A lookup answering 127.0.0.1 for any name after `delayMs`. */
function slowLookup(delayMs: number): HostLookup {
  return async () => {
    await delay(delayMs);
    return ["127.0.0.1"];
  };
}

test("an attempt's time limit counts its host's resolution: a slow lookup leaves the answer less time", async (t) => {
  const receiver = await startReceiver("127.0.0.1", (request, response) => {
    setTimeout(() => answerWith(200, "late")(request, response), 500);
  });
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => receiver.close());
  const settings = { timeoutMs: 800, trustedTargets: ONLY_127_0_0_1, agents };
  const url = `http://slow.example:${receiver.port}/`;

  const quick = await postToTarget(url, HEADERS, BODY, { ...settings, lookup: slowLookup(0) });
  t.like(quick, { status: 200 });
  const slow = await postToTarget(url, HEADERS, BODY, { ...settings, lookup: slowLookup(500) });
  t.like(slow, { error: "time-out after 800 ms" });
  t.true(slow.durationMs >= 790, `the duration counts the lookup: ${slow.durationMs} ms`);
  const stalled = await postToTarget(url, HEADERS, BODY, { ...settings, lookup: slowLookup(5_000) });
  t.like(stalled, { error: "dns: time-out resolving slow.example" });
  t.true(stalled.durationMs >= 790 && stalled.durationMs < 5_000, `${stalled.durationMs} ms`);
});

test("a receiver that stalls in the middle of its body: a time-out error too", async (t) => {
  const receiver = await startReceiver("127.0.0.1", (_request, response) => {
    response.writeHead(200, { "content-length": 1000 });
    response.write("only the start");
  });
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => receiver.close());

  const result = await post(`http://127.0.0.1:${receiver.port}/`, "127.0.0.1", agents, 300);
  t.like(result, { error: "time-out after 300 ms" });
  t.true(result.durationMs >= 290 && result.durationMs < 1500, `${result.durationMs} ms`);
});

test("a closed port: connection refused", async (t) => {
  const receiver = await startReceiver("127.0.0.1", answerWith(200));
  const { port } = receiver;
  await receiver.close();
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));

  const result = await post(`http://127.0.0.1:${port}/`, "127.0.0.1", agents);
  t.like(result, { error: "connection refused" });
  t.true(result.durationMs < 1500);
});

test("the checked address is connected to; the name is not resolved again", async (t) => {
  const checked = await startReceiver("127.0.0.3", answerWith(200, "checked"));
  const byName = await startReceiver("127.0.0.1", answerWith(200, "by name"), { port: checked.port });
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([checked.close(), byName.close()]));

  const trusted = parseTrustedTargets("localhost");
  const result = responseOf(await post(`http://localhost:${checked.port}/in`, "127.0.0.3", agents, 2000, trusted));
  t.is(result.body.toString(), "checked");
  t.is(checked.requests[0].headers.host, `localhost:${checked.port}`);
  t.is(byName.connections, 0, "localhost (127.0.0.1) was not looked up and connected to");
});

test("https: SNI and certificate are checked against the URL's name while connecting to the address", async (t) => {
  const cert = await createSelfSignedCert();
  t.teardown(() => cert.remove());
  const tls = { cert: cert.cert, key: fs.readFileSync(cert.keyFile) };
  const receiver = await startReceiver("127.0.0.3", answerWith(200, "secure"), { tls });
  const agents = createWebhookAgents({ ca: cert.cert });
  const defaultAgents = createWebhookAgents();
  t.teardown(() => [agents, defaultAgents].forEach(destroyWebhookAgents));
  t.teardown(() => receiver.close());

  const trusted = parseTrustedTargets("localhost,wrong.localhost");
  const result = responseOf(await post(`https://localhost:${receiver.port}/`, "127.0.0.3", agents, 2000, trusted));
  t.is(result.body.toString(), "secure");
  t.is(receiver.requests[0].servername, "localhost");
  t.is(receiver.requests[0].headers.host, `localhost:${receiver.port}`);

  const wrongName = await post(`https://wrong.localhost:${receiver.port}/`, "127.0.0.3", agents, 2000, trusted);
  t.like(wrongName, { error: "tls: ERR_TLS_CERT_ALTNAME_INVALID" });
  const literal = await post(`https://127.0.0.3:${receiver.port}/`, "127.0.0.3", agents, 2000, trusted);
  t.like(literal, { error: "tls: ERR_TLS_CERT_ALTNAME_INVALID" }, "an IP literal is checked as an address");
  const untrustedCa = await post(`https://localhost:${receiver.port}/`, "127.0.0.3", defaultAgents, 2000, trusted);
  t.like(untrustedCa, { error: "tls: DEPTH_ZERO_SELF_SIGNED_CERT" });
  t.is(receiver.requests.length, 1);
});

// Request forgery: only 127.0.0.1 is trusted; a listener on 127.0.0.2 must never see a connection.

test("a name answering 127.0.0.2 when only 127.0.0.1 is trusted is refused without connecting", async (t) => {
  const forbidden = await startReceiver("127.0.0.2", answerWith(200));
  const allowed = await startReceiver("127.0.0.1", answerWith(200, "allowed"));
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([forbidden.close(), allowed.close()]));

  const lookup: HostLookup = async (hostname) => (hostname === "rebound.example" ? ["127.0.0.2"] : ["127.0.0.1"]);
  const refused = await deliver(`http://rebound.example:${forbidden.port}/`, ONLY_127_0_0_1, lookup, agents);
  t.deepEqual(refused, { refusal: "address not allowed: 127.0.0.2" });
  const mixed: HostLookup = async () => ["127.0.0.1", "127.0.0.2"];
  t.deepEqual(await deliver(`http://mixed.example:${forbidden.port}/`, ONLY_127_0_0_1, mixed, agents), {
    refusal: "address not allowed: 127.0.0.2",
  });

  const delivered = responseOf(await deliver(`http://good.example:${allowed.port}/`, ONLY_127_0_0_1, lookup, agents));
  t.is(delivered.body.toString(), "allowed", "the same path does deliver to the trusted address");
  await delay(100);
  t.is(forbidden.connections, 0);
  t.is(allowed.connections, 1);
});

test("a name rebinding from 127.0.0.1 to 127.0.0.2 between attempts: the second is refused", async (t) => {
  const forbidden = await startReceiver("127.0.0.2", answerWith(200));
  const allowed = await startReceiver("127.0.0.1", answerWith(200), { port: forbidden.port });
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([forbidden.close(), allowed.close()]));

  const answers = [["127.0.0.1"], ["127.0.0.2"]];
  const rebinding: HostLookup = async () => answers.shift() ?? [];
  const url = `http://rebinding.example:${forbidden.port}/`;
  t.is(responseOf(await deliver(url, ONLY_127_0_0_1, rebinding, agents)).status, 200);
  t.deepEqual(await deliver(url, ONLY_127_0_0_1, rebinding, agents), { refusal: "address not allowed: 127.0.0.2" });
  await delay(100);
  t.is(allowed.connections, 1);
  t.is(forbidden.connections, 0);
});

test("loopback literals other than the trusted one are refused without connecting", async (t) => {
  const forbidden = await startReceiver("127.0.0.2", answerWith(200));
  const everywhere = await startReceiver("0.0.0.0", answerWith(200));
  const agents = createWebhookAgents();
  t.teardown(() => destroyWebhookAgents(agents));
  t.teardown(() => Promise.all([forbidden.close(), everywhere.close()]));

  for (const port of [forbidden.port, everywhere.port]) {
    const urls = [
      `http://127.0.0.2:${port}/`,
      `https://127.0.0.2:${port}/`,
      `http://2130706434:${port}/`,
      `http://127.2:${port}/`,
      `http://[::ffff:127.0.0.2]:${port}/`,
      `http://0.0.0.0:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::]:${port}/`,
      `http://localhost:${port}/`,
      `http://u:p@127.0.0.1:${port}/`,
      `ftp://127.0.0.1:${port}/`,
    ];
    for (const url of urls) {
      const result = await deliver(url, ONLY_127_0_0_1, noDns, agents);
      t.true(isRefusal(result), `${url}: ${JSON.stringify(result)}`);
    }
  }
  await delay(100);
  t.is(forbidden.connections, 0);
  t.is(everywhere.connections, 0);
});
