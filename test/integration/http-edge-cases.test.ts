import { randomBytes, randomInt } from "node:crypto";
import { once } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { gzipSync } from "node:zlib";
import { createClient as createRedisClient } from "@redis/client";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { requestToken } from "../support/auth.js";
import { CLIENTS } from "../support/oauth-clients.js";
import { pollUntil } from "../support/poll.js";
import { type ParsedResponse, parseHttpResponse } from "../support/raw-http.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

const PROBLEM = "application/problem+json";
const TOKEN_PATH = "/auth/connect/token";

// ---------------------------------------------------------------------------------------------------------------
// Helpers: raw HTTP/1.1 over node:net, h2c over node:http2, token requests from a chosen loopback address.

type RawResponse = ParsedResponse;

async function connect(port: number): Promise<net.Socket> {
  const socket = net.connect(port, "127.0.0.1");
  await once(socket, "connect");
  return socket;
}

/** Everything the server sends on `socket` until the connection closes; rejects after `timeoutMs`. */
function readUntilClosed(socket: net.Socket, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection stayed open ${timeoutMs} ms; received: ${Buffer.concat(chunks)}`));
    }, timeoutMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // A reset after the answer still lets us judge what arrived; "close" follows every error.
    socket.on("error", () => undefined);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString("utf8"));
    });
  });
}

/** Writes `request` as is on a fresh connection and answers all the server sent until it closed. */
async function rawExchange(port: number, request: string | Buffer): Promise<string> {
  const socket = await connect(port);
  const received = readUntilClosed(socket);
  socket.write(request);
  return received;
}

/** The first response of `text`; `head` for a response to HEAD, which has no body whatever Content-Length says. */
function parseResponse(text: string, options: { head?: boolean } = {}): RawResponse {
  const response = parseHttpResponse(text, options);
  if (!response) throw new Error(`no complete HTTP response in ${JSON.stringify(text)}`);
  return response;
}

function assertProblemBody(
  t: ExecutionContext<unknown>,
  contentType: string | undefined | null,
  bodyText: string,
  status: number,
  slug?: string,
): Record<string, any> {
  t.is(contentType, PROBLEM);
  const body = JSON.parse(bodyText) as Record<string, any>;
  t.is(body.status, status);
  t.is(typeof body.title, "string");
  t.is(typeof body.detail, "string");
  t.is(typeof body.type, "string");
  if (slug) t.is(body.type, `urn:provision:problem:${slug}`);
  return body;
}

interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
}

/** One request on a fresh cleartext HTTP/2 session (`connection` lets a test choose the local address). */
async function h2cRequest(
  server: TestServer,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
  connection?: () => net.Socket,
): Promise<H2Response> {
  const session = http2.connect(server.baseUrl, connection ? { createConnection: connection } : {});
  try {
    session.on("error", () => undefined);
    const stream = session.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    const responded = once(stream, "response") as Promise<[http2.IncomingHttpHeaders]>;
    if (body !== undefined) stream.end(body);
    const [responseHeaders] = await responded;
    await once(stream, "end");
    return {
      status: Number(responseHeaders[":status"]),
      headers: responseHeaders,
      body: Buffer.concat(chunks).toString("utf8"),
    };
  } finally {
    session.close();
  }
}

/** A loopback address of this test's own: every test file shares one Redis, and with it 127.0.0.1's counters. */
function randomLoopbackAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

/** A documentation address (RFC 5737) nobody else's counters use. */
function randomDocumentationAddress(): string {
  return `198.51.100.${randomInt(1, 255)}`;
}

/** A token request for the server's bootstrap client with a wrong secret: 401 while not rate limited. */
function wrongSecretForm(server: TestServer): string {
  return new URLSearchParams({
    grant_type: "client_credentials",
    client_id: server.admin.clientId,
    client_secret: "wrong",
  }).toString();
}

/** POSTs a token request over HTTP/1.1 from `localAddress` with `headers` added; answers the status. */
function http1TokenRequest(server: TestServer, localAddress: string, headers: Record<string, string> = {}) {
  const form = wrongSecretForm(server);
  return new Promise<number>((resolve, reject) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port: server.port,
        path: TOKEN_PATH,
        method: "POST",
        localAddress,
        agent: false,
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "content-length": Buffer.byteLength(form),
          ...headers,
        },
      },
      (response) => {
        response.resume();
        response.once("end", () => resolve(response.statusCode ?? 0));
        response.once("error", reject);
      },
    );
    request.once("error", reject);
    request.end(form);
  });
}

/** POSTs a token request over cleartext HTTP/2 from `localAddress`; answers the status. */
async function h2cTokenRequest(server: TestServer, localAddress: string): Promise<number> {
  const response = await h2cRequest(
    server,
    { ":method": "POST", ":path": TOKEN_PATH, "content-type": "application/x-www-form-urlencoded" },
    wrongSecretForm(server),
    () => net.connect({ host: "127.0.0.1", port: server.port, localAddress }),
  );
  return response.status;
}

async function redisClient(t: ExecutionContext<unknown>) {
  const redis = createRedisClient({ url: TEST_REDIS_URL });
  await redis.connect();
  t.teardown(() => redis.close());
  return redis;
}

const addressKey = (address: string) => `provision:rate:token:address:${address}`;

function requestLog(server: TestServer, requestId: string): Promise<Record<string, any>> {
  return pollUntil(`the log line of request ${requestId}`, () =>
    server.logs
      .map((line) => JSON.parse(line) as Record<string, any>)
      .find((record) => record.msg === "request" && record.requestId === requestId),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Request targets Node's parser accepts but WHATWG URL refuses.

for (const target of ["//a:99999/", "//[/x"]) {
  test(`HTTP/1.1 GET ${target} answers a 400 problem and the server keeps serving`, async (t) => {
    const { server } = t.context;
    const text = await rawExchange(server.port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const response = parseResponse(text);
    t.regex(response.statusLine, /^HTTP\/1\.1 400 /);
    assertProblemBody(t, response.headers["content-type"], response.body, 400, "malformed-request");
    t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
  });

  test(`h2c GET ${target} answers a 400 problem and the server keeps serving`, async (t) => {
    const { server } = t.context;
    const response = await h2cRequest(server, { ":method": "GET", ":path": target });
    t.is(response.status, 400);
    assertProblemBody(t, response.headers["content-type"], response.body, 400, "malformed-request");
    t.is((await h2cRequest(server, { ":method": "GET", ":path": "/healthz" })).status, 200);
    t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Requests Node's HTTP/1.1 parser refuses, answered with problem records.

test("headers that never finish answer 408 with a problem and the connection is closed", async (t) => {
  const server = await startTestServer({ httpTimeouts: { headersMs: 1000, requestMs: 2000, checkIntervalMs: 250 } });
  t.teardown(() => server.close());
  const socket = await connect(server.port);
  const received = readUntilClosed(socket, 8000);
  const started = Date.now();
  socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
  const text = await received;
  const elapsed = Date.now() - started;
  t.true(elapsed < 5000, `closed after ${elapsed} ms`);
  t.true(elapsed >= 500, `not before the header timeout: closed after ${elapsed} ms`);
  const response = parseResponse(text);
  t.regex(response.statusLine, /^HTTP\/1\.1 408 /);
  t.is(response.headers.connection, "close");
  assertProblemBody(t, response.headers["content-type"], response.body, 408, "request-timeout");
  t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
  const refused = server.logs
    .map((line) => JSON.parse(line))
    .filter((entry) => entry.msg.startsWith("request refused"));
  t.like(refused[0], { status: 408, problem: "request-timeout", msg: "request refused before it was read" });
});

test("a body that never finishes answers 408 once the request timeout passes, and is no handler failure", async (t) => {
  const server = await startTestServer({ httpTimeouts: { headersMs: 1000, requestMs: 2000, checkIntervalMs: 250 } });
  t.teardown(() => server.close());
  const requestId = `slow-body-${randomBytes(6).toString("hex")}`;
  const socket = await connect(server.port);
  const received = readUntilClosed(socket, 8000);
  const started = Date.now();
  socket.write(
    `POST ${PRODUCTS} HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.adminAuthorization}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 100\r\nX-Request-Id: ${requestId}\r\n\r\n{"pr`,
  );
  const text = await received;
  const elapsed = Date.now() - started;
  t.true(elapsed < 6000, `closed after ${elapsed} ms`);
  t.true(elapsed >= 1500, `not before the request timeout: closed after ${elapsed} ms`);
  const response = parseResponse(text);
  t.regex(response.statusLine, /^HTTP\/1\.1 408 /);
  assertProblemBody(t, response.headers["content-type"], response.body, 408, "request-timeout");
  t.is(response.headers["x-request-id"], requestId);
  t.is(JSON.parse(response.body).requestId, requestId);
  t.is((await requestLog(server, requestId)).status, 408, "logged as the server answered it, not as 499");
  await delay(200);
  t.deepEqual(
    server.logs.map((line) => JSON.parse(line) as Record<string, any>).filter((entry) => entry.level === "error"),
    [],
  );
});

test("a 20 KB header answers 431 with a problem", async (t) => {
  const { server } = t.context;
  const text = await rawExchange(
    server.port,
    `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20 * 1024)}\r\nConnection: close\r\n\r\n`,
  );
  const response = parseResponse(text);
  t.regex(response.statusLine, /^HTTP\/1\.1 431 /);
  assertProblemBody(t, response.headers["content-type"], response.body, 431, "headers-too-large");
  t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
});

test("a malformed request line answers 400 with a problem", async (t) => {
  const { server } = t.context;
  const text = await rawExchange(server.port, "GET /hea lthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const response = parseResponse(text);
  t.regex(response.statusLine, /^HTTP\/1\.1 400 /);
  assertProblemBody(t, response.headers["content-type"], response.body, 400, "malformed-request");
  t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
});

for (const [what, next] of [
  ["a malformed request", "GARBAGE GARBAGE\r\n\r\n"],
  ["a request with 20 KB of headers", `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20 * 1024)}\r\n\r\n`],
]) {
  test(`a request's answer is sent before the connection is cut for ${what} sent after it`, async (t) => {
    const { server } = t.context;
    const text = await rawExchange(
      server.port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: answered-first\r\n\r\n${next}`,
    );
    const response = parseResponse(text);
    t.regex(response.statusLine, /^HTTP\/1\.1 200 /);
    t.is(response.headers["x-request-id"], "answered-first");
    t.deepEqual(JSON.parse(response.body), { status: "ok" });
  });
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Protocol sniffing: a first segment that is a prefix of the HTTP/2 preface is not enough to choose HTTP/2.

for (const method of ["POST", "PUT"]) {
  test(`an HTTP/1.1 ${method} whose first segment is only "P" is served as HTTP/1.1`, async (t) => {
    const { server } = t.context;
    const socket = await connect(server.port);
    socket.setNoDelay(true);
    const received = readUntilClosed(socket);
    socket.write("P");
    // Long enough for "P" to arrive alone, which leaves the server undecided between HTTP/1.1 and HTTP/2.
    await delay(100);
    socket.write(`${method.slice(1)} /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    const response = parseResponse(await received);
    t.regex(response.statusLine, /^HTTP\/1\.1 405 /);
    t.is(response.headers.allow, "GET, HEAD");
    assertProblemBody(t, response.headers["content-type"], response.body, 405, "method-not-allowed");
  });
}

// ---------------------------------------------------------------------------------------------------------------
// 4. The client address token requests are counted under.

test("behind a trusted proxy, token requests are limited per X-Forwarded-For client", async (t) => {
  const server = await startTestServer({
    env: { TRUSTED_PROXIES: "127.0.0.1", TOKEN_RATE_LIMIT_PER_ADDRESS: "3" },
  });
  t.teardown(() => server.close());
  const [first, second] = ["203.0.113.7", "203.0.113.8"];
  const redis = await redisClient(t);
  // Fixed addresses: start each run with fresh windows, and leave none behind.
  await redis.del([addressKey(first), addressKey(second)]);
  t.teardown(() => redis.del([addressKey(first), addressKey(second)]).then(() => undefined));

  const from = async (forwardedFor: string) => {
    const response = await fetch(`${server.baseUrl}${TOKEN_PATH}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": forwardedFor },
      body: wrongSecretForm(server),
    });
    await response.arrayBuffer();
    return response.status;
  };
  t.is(await from(first), 401, "request 1 from 203.0.113.7");
  // What the client wrote left of the address our proxy appended does not count.
  t.is(await from(`198.51.100.99, ${first}`), 401, "request 2 from 203.0.113.7");
  t.is(await from(first), 401, "request 3 from 203.0.113.7");
  t.is(await from(first), 429, "request 4 from 203.0.113.7");
  t.is(await from(`10.9.9.9, ${first}`), 429, "still 203.0.113.7 whatever the client wrote before it");

  for (let attempt = 1; attempt <= 3; attempt++) t.is(await from(second), 401, `request ${attempt} from 203.0.113.8`);
  t.is(await from(second), 429, "request 4 from 203.0.113.8");
  t.true((await redis.pTTL(addressKey(first))) > 0, "203.0.113.7 is the key counted in Redis");
});

test("without TRUSTED_PROXIES, X-Forwarded-For is ignored and requests count for the peer", async (t) => {
  const server = await startTestServer({ env: { TOKEN_RATE_LIMIT_PER_ADDRESS: "3" } });
  t.teardown(() => server.close());
  const redis = await redisClient(t);
  const peer = randomLoopbackAddress();
  const claimed = [randomDocumentationAddress(), randomDocumentationAddress(), randomDocumentationAddress()];
  for (const [index, address] of claimed.entries()) {
    t.is(await http1TokenRequest(server, peer, { "x-forwarded-for": address }), 401, `request ${index + 1}`);
  }
  t.is(await http1TokenRequest(server, peer, { "x-forwarded-for": randomDocumentationAddress() }), 429);
  t.is(await http1TokenRequest(server, peer), 429, "and without the header");
  for (const address of claimed) t.is(await redis.exists(addressKey(address)), 0, `nothing counted for ${address}`);
  t.is(Number(await redis.get(addressKey(peer))), 5, "all five counted for the peer");
  t.is(await http1TokenRequest(server, randomLoopbackAddress()), 401, "another peer has its own limit");
});

test("token requests over h2c count for the peer's address, the same bucket as HTTP/1.1", async (t) => {
  const server = await startTestServer({ env: { TOKEN_RATE_LIMIT_PER_ADDRESS: "3" } });
  t.teardown(() => server.close());
  const redis = await redisClient(t);
  const peer = randomLoopbackAddress();
  for (let attempt = 1; attempt <= 3; attempt++) {
    t.is(await h2cTokenRequest(server, peer), 401, `h2c request ${attempt}`);
  }
  t.is(await h2cTokenRequest(server, peer), 429, "h2c request 4");
  t.is(await http1TokenRequest(server, peer), 429, "HTTP/1.1 from the same address");
  t.is(Number(await redis.get(addressKey(peer))), 5);
  const other = randomLoopbackAddress();
  t.is(await h2cTokenRequest(server, other), 401, "h2c from another address has its own limit");
  t.is(await http1TokenRequest(server, other), 401);
});

// ---------------------------------------------------------------------------------------------------------------
// 5. REST request bodies and protocol headers.

test("a gzip-encoded JSON body answers 415", async (t) => {
  const { server } = t.context;
  const response = await fetch(server.baseUrl + PRODUCTS, {
    method: "POST",
    headers: {
      authorization: server.adminAuthorization,
      "content-type": "application/json",
      "content-encoding": "gzip",
    },
    body: gzipSync(JSON.stringify({ productCode: `GZIP-${randomBytes(4).toString("hex")}` })),
  });
  t.is(response.status, 415);
  assertProblemBody(
    t,
    response.headers.get("content-type"),
    await response.text(),
    415,
    "unsupported-content-encoding",
  );
});

test("Connect and gRPC timeout headers on a REST call are not passed on", async (t) => {
  const { server } = t.context;
  const protocolHeaders: Record<string, string>[] = [{ "connect-timeout-ms": "abc" }, { "grpc-timeout": "x" }];
  for (const headers of protocolHeaders) {
    const listed = await rest(server.baseUrl, "GET", PRODUCTS, undefined, headers);
    t.is(listed.status, 200, `GET with ${JSON.stringify(headers)}: ${JSON.stringify(listed.body)}`);
    const productCode = `TIMEOUT-${randomBytes(4).toString("hex")}`;
    const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode }, headers);
    t.is(created.status, 200, `POST with ${JSON.stringify(headers)}: ${JSON.stringify(created.body)}`);
    t.is(created.body.productCode, productCode);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// 6. Numbers a double or an enum cannot hold name their field.

async function postMonitoredAsset(server: TestServer, productId: string, json: string) {
  const response = await fetch(`${server.baseUrl}${PRODUCTS}/${productId}/monitored-resources`, {
    method: "POST",
    headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
    body: json,
  });
  return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() };
}

test("1e400 for a double, as a number or a string, answers 400 naming the field's path", async (t) => {
  const { server } = t.context;
  const product = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: `DBL-${randomBytes(4).toString("hex")}`,
  });
  t.is(product.status, 200);
  for (const value of ["1e400", '"1e400"', "-1e400"]) {
    const json = `{"metricName":"m","metricType":1,"meteredUsage":{"usageTiers":[{"startUsage":${value}}]}}`;
    const response = await postMonitoredAsset(server, product.body.id, json);
    t.is(response.status, 400, `${value}: ${response.text}`);
    const body = assertProblemBody(t, response.contentType, response.text, 400, "validation");
    t.is(body.errors?.[0]?.field, "meteredUsage.usageTiers[0].startUsage", value);
  }
});

test("an enum value outside int32 answers 400 naming the field", async (t) => {
  const { server } = t.context;
  const product = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: `ENUM-${randomBytes(4).toString("hex")}`,
  });
  t.is(product.status, 200);
  const response = await postMonitoredAsset(server, product.body.id, '{"metricName":"m","metricType":4294967296}');
  t.is(response.status, 400, response.text);
  const body = assertProblemBody(t, response.contentType, response.text, 400, "validation");
  t.deepEqual(
    body.errors.map((error: { field: string }) => error.field),
    ["metricType"],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// 7. A client that goes away mid-body.

test("a client that sends part of a body and goes away is logged as 499, not as a handler failure", async (t) => {
  const { server } = t.context;
  const requestId = `partial-${randomBytes(6).toString("hex")}`;
  const socket = await connect(server.port);
  socket.on("error", () => undefined);
  const continued = new Promise<void>((resolve) => {
    let seen = "";
    socket.on("data", (chunk: Buffer) => {
      seen += chunk.toString("latin1");
      if (seen.includes("100 Continue")) resolve();
    });
  });
  // 100-continue: the interim answer says the server is handling the request before the body comes.
  socket.write(
    `POST ${PRODUCTS} HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.adminAuthorization}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n` +
      `X-Request-Id: ${requestId}\r\n\r\n`,
  );
  await continued;
  socket.write('{"pr');
  // Long enough for the handler to be waiting on the rest of the body, the case under test.
  await delay(150);
  socket.destroy();

  const record = await requestLog(server, requestId);
  t.is(record.status, 499);
  t.is(record.method, "POST");
  t.is(record.path, PRODUCTS);
  // A failure would be logged right after the close; give it a moment to show up.
  await delay(200);
  const records = server.logs.map((line) => JSON.parse(line) as Record<string, any>);
  t.deepEqual(
    records.filter((entry) => entry.msg === "request handler failed" || entry.level === "error"),
    [],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// 8. RPC-shaped paths that name no method.

test("a Connect POST to a method that does not exist answers a 404 problem", async (t) => {
  const { server } = t.context;
  for (const path of ["/provision.v1.CatalogService/NoSuchMethod", "/provision.v1.NoSuchService/List"]) {
    const response = await fetch(server.baseUrl + path, {
      method: "POST",
      headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
      body: "{}",
    });
    t.is(response.status, 404, path);
    const body = assertProblemBody(t, response.headers.get("content-type"), await response.text(), 404);
    t.is(body.instance, path);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// 9. HEAD and the Allow header.

test("HEAD /healthz answers 200 with no body", async (t) => {
  const { server } = t.context;
  const text = await rawExchange(server.port, "HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const response = parseResponse(text, { head: true });
  t.regex(response.statusLine, /^HTTP\/1\.1 200 /);
  t.regex(response.headers["content-type"] ?? "", /^application\/json/);
  t.is(response.rest, "", "no body after the head");
});

test("POST /readyz answers 405 with Allow: GET, HEAD", async (t) => {
  const response = await fetch(`${t.context.server.baseUrl}/readyz`, { method: "POST" });
  t.is(response.status, 405);
  t.is(response.headers.get("allow"), "GET, HEAD");
  assertProblemBody(t, response.headers.get("content-type"), await response.text(), 405, "method-not-allowed");
});

test("the discovery documents answer other methods 405 with Allow: GET, HEAD", async (t) => {
  for (const path of ["/.well-known/jwks.json", "/.well-known/openid-configuration"]) {
    for (const method of ["POST", "DELETE", "PUT"]) {
      const response = await fetch(`${t.context.server.baseUrl}${path}`, { method });
      t.is(response.status, 405, `${method} ${path}`);
      t.is(response.headers.get("allow"), "GET, HEAD");
      assertProblemBody(t, response.headers.get("content-type"), await response.text(), 405, "method-not-allowed");
    }
    t.is((await fetch(`${t.context.server.baseUrl}${path}`, { method: "HEAD" })).status, 200);
  }
});

test("HEAD on a REST collection answers 200 with no body", async (t) => {
  const { server } = t.context;
  const text = await rawExchange(
    server.port,
    `HEAD ${PRODUCTS} HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.adminAuthorization}\r\nConnection: close\r\n\r\n`,
  );
  const response = parseResponse(text, { head: true });
  t.regex(response.statusLine, /^HTTP\/1\.1 200 /);
  t.regex(response.headers["content-type"] ?? "", /^application\/json/);
  t.is(response.rest, "", "no body after the head");
  const unauthenticated = await fetch(server.baseUrl + PRODUCTS, { method: "HEAD" });
  t.is(unauthenticated.status, 401, "HEAD is authorized like GET");
});

test("DELETE on a REST collection answers 405 with Allow: GET, HEAD, POST", async (t) => {
  const { server } = t.context;
  const response = await fetch(server.baseUrl + PRODUCTS, {
    method: "DELETE",
    headers: { authorization: server.adminAuthorization },
  });
  t.is(response.status, 405);
  t.is(response.headers.get("allow"), "GET, HEAD, POST");
  assertProblemBody(t, response.headers.get("content-type"), await response.text(), 405, "method-not-allowed");
});

// ---------------------------------------------------------------------------------------------------------------
// 10. Booleans in paths.

test("a boolean in a path is read in any case", async (t) => {
  const { server } = t.context;
  const created = await rest(server.baseUrl, "POST", CLIENTS, { name: "case-insensitive", scopes: ["catalog:read"] });
  t.is(created.status, 200, JSON.stringify(created.body));
  const { clientId } = created.body.client;
  const { clientSecret } = created.body;

  const disabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/False`);
  t.is(disabled.status, 200, JSON.stringify(disabled.body));
  t.like(disabled.body, { clientId, disabled: true });
  t.true((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).body.disabled);
  t.is((await requestToken(server.baseUrl, clientId, clientSecret)).status, 401);

  const enabled = await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/True`);
  t.is(enabled.status, 200, JSON.stringify(enabled.body));
  t.like(enabled.body, { clientId, disabled: false });
  t.false((await rest(server.baseUrl, "GET", `${CLIENTS}/${clientId}`)).body.disabled);
  t.is((await requestToken(server.baseUrl, clientId, clientSecret)).status, 200);

  t.like((await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/FALSE`)).body, { disabled: true });
  t.like((await rest(server.baseUrl, "PUT", `${CLIENTS}/${clientId}/enabled/tRuE`)).body, { disabled: false });
});

test("HTTP/2 advertises at most 128 concurrent streams; 200 requests at once on one connection all answer", async (t) => {
  const { server } = t.context;
  const session = http2.connect(server.baseUrl);
  t.teardown(() => session.close());
  session.on("error", () => undefined);
  const [settings] = (await once(session, "remoteSettings")) as [http2.Settings];
  t.is(settings.maxConcurrentStreams, 128);
  const statuses = await Promise.all(
    Array.from({ length: 200 }, async () => {
      const stream = session.request({ ":path": "/healthz" });
      stream.resume();
      const [headers] = (await once(stream, "response")) as [http2.IncomingHttpHeaders];
      await once(stream, "end");
      return headers[":status"];
    }),
  );
  t.deepEqual(new Set(statuses), new Set([200]), "the client queued what the server's limit held back");
});
