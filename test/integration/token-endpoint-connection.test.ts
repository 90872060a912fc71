import { randomInt } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { isCompleteResponse, RawConnection } from "../support/raw-http.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

const TOKEN_PATH = "/auth/connect/token";
const HEALTH_CHECK = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

function head(headers: Record<string, string>): string {
  const lines = Object.entries({ host: "127.0.0.1", ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  return `POST ${TOKEN_PATH} HTTP/1.1\r\n${lines.join("")}\r\n`;
}

/**
 * Sends a token request whose body is still arriving when the endpoint answers, then the rest of the body and a
 * health check on the same connection. The health check must be answered, or the answer must have announced
 * and carried out the close. A connection left open with neither is the bug: a pooling client's next request
 * on it hangs.
 */
async function answerWhileBodyArrives(
  t: ExecutionContext<{ server: TestServer }>,
  headers: Record<string, string>,
  body: string,
  expected: { status: number; sentBeforeAnswer?: number },
): Promise<{ first: string; connection: RawConnection }> {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const sentBeforeAnswer = expected.sentBeforeAnswer ?? 8000;
  connection.write(head(headers) + body.slice(0, sentBeforeAnswer));
  await connection.until(() => isCompleteResponse(connection.responses()[0]));
  const [first] = connection.responses();
  t.true(first.startsWith(`HTTP/1.1 ${expected.status} `), first.slice(0, 200));
  connection.write(body.slice(sentBeforeAnswer));
  connection.write(HEALTH_CHECK);
  await connection.until(() => connection.closed || isCompleteResponse(connection.responses()[1]));
  if (connection.responses().length > 1) t.true(connection.responses()[1].startsWith("HTTP/1.1 200 "));
  else t.regex(first, /\r\nconnection: close\r\n/i, "a connection the server leaves is announced closed");
  return { first, connection };
}

test("a form over 16 KiB is refused with 400 and the keep-alive connection answers the next request", async (t) => {
  const body = `grant_type=client_credentials&pad=${"z".repeat(20_000)}`;
  const { connection } = await answerWhileBodyArrives(
    t,
    { "content-type": "application/x-www-form-urlencoded", "content-length": String(body.length) },
    body,
    { status: 400, sentBeforeAnswer: 17_000 },
  );
  t.is(connection.responses().length, 2, "a small body is read to its end and the connection kept");
});

test("a body that is not a form is refused with 400 and the keep-alive connection answers the next request", async (t) => {
  const body = JSON.stringify({ grant_type: "client_credentials", pad: "z".repeat(20_000) });
  const { connection } = await answerWhileBodyArrives(
    t,
    { "content-type": "application/json", "content-length": String(body.length) },
    body,
    { status: 400 },
  );
  t.is(connection.responses().length, 2);
});

test("a chunked form over the limit is refused with 400 and leaves a working or a closed connection", async (t) => {
  const form = `grant_type=client_credentials&pad=${"z".repeat(20_000)}`;
  const body = `${form.length.toString(16)}\r\n${form}\r\n0\r\n\r\n`;
  await answerWhileBodyArrives(
    t,
    { "content-type": "application/x-www-form-urlencoded", "transfer-encoding": "chunked" },
    body,
    { status: 400, sentBeforeAnswer: 17_000 },
  );
});

test("a body declared far larger than the limit is refused at once, with Connection: close, and closed", async (t) => {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const declared = 50 * 1024 * 1024;
  connection.write(
    head({ "content-type": "application/x-www-form-urlencoded", "content-length": String(declared) }) +
      "grant_type=client_credentials&pad=zzzz",
  );
  await connection.until(() => isCompleteResponse(connection.responses()[0]));
  const [first] = connection.responses();
  t.true(first.startsWith("HTTP/1.1 400 "), first.slice(0, 200));
  t.regex(first, /\r\nconnection: close\r\n/i);
  await connection.until(() => connection.closed);
  t.true(connection.closed);
});

test("a sender that keeps going past the declared-small bound is cut off, never read without end", async (t) => {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const chunk = "z".repeat(64 * 1024);
  connection.write(
    head({ "content-type": "application/x-www-form-urlencoded", "transfer-encoding": "chunked" }) +
      `${chunk.length.toString(16)}\r\n${chunk}\r\n`,
  );
  await connection.until(() => isCompleteResponse(connection.responses()[0]));
  t.true(connection.responses()[0].startsWith("HTTP/1.1 400 "));
  for (let sent = 0; sent < 8 * 1024 * 1024 && !connection.closed; sent += chunk.length) {
    connection.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await connection.until(() => connection.closed);
  t.true(connection.closed, "the server closed the connection instead of reading on");
});

test("a 429 answered before the form is read leaves the keep-alive connection working", async (t) => {
  const server = await startTestServer({ env: { TOKEN_RATE_LIMIT_PER_ADDRESS: "1" } });
  t.teardown(() => server.close());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const form = `grant_type=client_credentials&pad=${"z".repeat(10_000)}`;
  // Every test file shares one Redis, so a loopback address of this test's own stands in for 127.0.0.1.
  const localAddress = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
  const statuses: number[] = [];
  const ports: number[] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    const { status, localPort } = await post(server.port, agent, localAddress, form);
    statuses.push(status);
    ports.push(localPort);
  }
  t.deepEqual(statuses, [401, 429, 429]);
  t.is(new Set(ports).size, 1, "all three went over one connection");
});

test("a 405 for a GET with a body leaves the keep-alive connection working", async (t) => {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const body = "z".repeat(10_000);
  connection.write(
    `GET ${TOKEN_PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${body.length}\r\n\r\n${body}${HEALTH_CHECK}`,
  );
  await connection.until(() => isCompleteResponse(connection.responses()[1]));
  t.true(connection.responses()[0].startsWith("HTTP/1.1 405 "));
  t.true(connection.responses()[1].startsWith("HTTP/1.1 200 "));
});

/** POSTs `form` through `agent` and answers the status and the local port the request left from. */
function post(
  port: number,
  agent: http.Agent,
  localAddress: string,
  form: string,
): Promise<{ status: number; localPort: number }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port,
        path: TOKEN_PATH,
        method: "POST",
        agent,
        localAddress,
        headers: { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(form) },
      },
      (response) => {
        const localPort = (response.socket.address() as AddressInfo).port;
        response.resume();
        response.on("end", () => resolve({ status: response.statusCode ?? 0, localPort }));
      },
    );
    request.on("error", reject);
    request.setTimeout(5000, () => request.destroy(new Error("the request hung")));
    request.end(form);
  });
}
