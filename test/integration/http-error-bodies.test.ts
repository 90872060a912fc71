import { once } from "node:events";
import http2 from "node:http2";
import net from "node:net";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { isCompleteResponse, type ParsedResponse, parseHttpResponse, RawConnection } from "../support/raw-http.js";
import { PRODUCTS } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

const LIST_PRODUCTS = "/provision.v1.CatalogService/ListProducts";

type RawResponse = Pick<ParsedResponse, "status" | "headers" | "body">;

/**
 * Writes `request` on a fresh connection; answers the first final response (interim 1xx responses are skipped)
 * and whether the server closed the connection after it.
 */
async function rawExchange(port: number, request: string): Promise<RawResponse & { closed: boolean }> {
  const socket = net.connect(port, "127.0.0.1");
  await once(socket, "connect");
  socket.on("error", () => undefined);
  socket.setEncoding("utf8");
  let text = "";
  let wake: () => void = () => undefined;
  socket.on("data", (chunk: string) => {
    text += chunk;
    wake();
  });
  let closed = false;
  socket.once("close", () => {
    closed = true;
    wake();
  });
  socket.write(request);
  const deadline = Date.now() + 5000;
  let response = parseFinal(text);
  while (!response && !closed && Date.now() < deadline) {
    await new Promise<void>((resolve) => {
      wake = resolve;
      setTimeout(resolve, 100);
    });
    response = parseFinal(text);
  }
  if (!response) throw new Error(`no whole response arrived: ${JSON.stringify(text)}`);
  // A server that keeps the connection leaves it open: give a closing one a moment to close.
  if (!closed) await Promise.race([once(socket, "close"), new Promise((resolve) => setTimeout(resolve, 300))]);
  socket.destroy();
  return { ...response, closed };
}

/** The first final response of `text` once whole (interim 1xx responses are skipped); undefined before. */
function parseFinal(text: string): RawResponse | undefined {
  const interim = /^HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n/.exec(text);
  if (interim) return parseFinal(text.slice(interim[0].length));
  return isCompleteResponse(text) ? parseHttpResponse(text) : undefined;
}

function assertProblem(t: ExecutionContext, response: RawResponse, status: number, slug: string) {
  t.is(response.status, status, response.body);
  t.is(response.headers["content-type"], "application/problem+json");
  const body = JSON.parse(response.body);
  t.is(body.status, status);
  t.is(body.type, `urn:provision:problem:${slug}`);
  t.is(typeof body.detail, "string");
}

function assertConnectError(t: ExecutionContext, response: RawResponse, status: number, code: string) {
  t.is(response.status, status, response.body);
  t.is(response.headers["content-type"], "application/json");
  const body = JSON.parse(response.body);
  t.is(body.code, code);
  t.is(typeof body.message, "string");
  t.true(body.message.length > 0);
}

test("an unknown Expect on a REST path answers 417 with a problem", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n",
  );
  assertProblem(t, response, 417, "expectation-failed");
  t.false(response.closed, "a request without a body keeps its connection");
});

test("an unknown Expect on an RPC path answers 417 with a Connect error", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    `POST ${LIST_PRODUCTS} HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Type: application/json\r\n` +
      "Content-Length: 2\r\n\r\n{}",
  );
  assertConnectError(t, response, 417, "invalid_argument");
});

test("an unknown Expect over h2c answers 417 with a problem", async (t) => {
  const session = http2.connect(t.context.server.baseUrl);
  t.teardown(() => session.close());
  const stream = session.request({ ":method": "GET", ":path": PRODUCTS, expect: "something-else" });
  let body = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    body += chunk;
  });
  const [headers] = (await once(stream, "response")) as [http2.IncomingHttpHeaders];
  await once(stream, "end");
  assertProblem(
    t,
    { status: Number(headers[":status"]), headers: { "content-type": String(headers["content-type"]) }, body },
    417,
    "expectation-failed",
  );
});

test("Expect: 100-continue is still met", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
  );
  t.is(response.status, 200);
  t.is(JSON.parse(response.body).status, "ok");
});

test("Expect: 100-continue is met when the body is read, and a request refused before that gets no 100", async (t) => {
  const { server } = t.context;
  const body = JSON.stringify({ productCode: `CONTINUE-${Date.now()}`, name: "Sent after 100" });
  const head = (authorization: string) =>
    `POST ${PRODUCTS} HTTP/1.1\r\nHost: x\r\n${authorization}Content-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`;

  const refused = await RawConnection.open(server.port);
  refused.write(head(""));
  await refused.until(() => refused.closed);
  const [answer, ...more] = refused.responses();
  t.regex(answer, /^HTTP\/1\.1 401 /, "the refusal comes first, with no 100 before it");
  t.regex(answer, /\r\nconnection: close\r\n/i);
  t.deepEqual(more, []);

  const accepted = await RawConnection.open(server.port);
  t.teardown(() => accepted.close());
  accepted.write(head(`Authorization: ${server.adminAuthorization}\r\n`));
  await accepted.until(() => accepted.responses()[0]?.startsWith("HTTP/1.1 100 Continue") ?? false);
  accepted.write(body);
  await accepted.until(() => isCompleteResponse(accepted.responses()[1]));
  t.regex(accepted.responses()[1], /^HTTP\/1\.1 200 /);
});

test("an HTTP/1.1 request without Host answers 400 with a problem and closes the connection", async (t) => {
  const response = await rawExchange(t.context.server.port, "GET /healthz HTTP/1.1\r\n\r\n");
  assertProblem(t, response, 400, "malformed-request");
  t.is(response.headers.connection, "close");
  t.true(response.closed);
});

test("an HTTP/1.1 request without Host on an RPC path answers 400 with a Connect error", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    `POST ${LIST_PRODUCTS} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
  );
  assertConnectError(t, response, 400, "invalid_argument");
  t.true(response.closed);
});

test("an HTTP/1.0 request without Host on an RPC path is answered, and the server keeps serving", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    `POST ${LIST_PRODUCTS} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
  );
  assertConnectError(t, response, 401, "unauthenticated");
  t.is((await fetch(`${t.context.server.baseUrl}/healthz`)).status, 200);
});

test("a content type no protocol serves on an RPC path answers 415 with a Connect error", async (t) => {
  const response = await rawExchange(
    t.context.server.port,
    `POST ${LIST_PRODUCTS} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}`,
  );
  assertConnectError(t, response, 415, "invalid_argument");
});

test("GET on an RPC path that is not GET-enabled answers 405 with Allow and a Connect error", async (t) => {
  const response = await rawExchange(t.context.server.port, `GET ${LIST_PRODUCTS} HTTP/1.1\r\nHost: x\r\n\r\n`);
  assertConnectError(t, response, 405, "unimplemented");
  t.is(response.headers.allow, "POST");
});
