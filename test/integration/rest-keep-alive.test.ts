import anyTest, { type TestFn } from "ava";
import { isCompleteResponse, RawConnection } from "../support/raw-http.js";
import { PRODUCTS } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer({ env: { BODY_LIMIT_BYTES: "4096" } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/**
 * Sends a POST whose body is still arriving when the server answers, then the rest of the body and a second
 * request on the same connection: the second request must be answered, or the first answer must have closed
 * the connection. A connection left open with neither is the bug (a pooling client's next request hangs).
 */
async function answerWhileBodyArrives(
  t: import("ava").ExecutionContext<{ server: TestServer }>,
  headers: Record<string, string>,
  expectedStatus: number,
  { chunked = false } = {},
) {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const json = `{"productCode":"SLOW","description":"${"z".repeat(20_000)}"}`;
  const body = chunked ? `${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n` : json;
  const framing = chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(body.length) };
  const head = Object.entries({ host: "127.0.0.1", ...framing, ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  connection.write(`POST ${PRODUCTS} HTTP/1.1\r\n${head}\r\n${body.slice(0, 8000)}`);
  await connection.until(() => isCompleteResponse(connection.responses()[0]));
  const [first] = connection.responses();
  t.true(first.startsWith(`HTTP/1.1 ${expectedStatus} `), first.slice(0, 80));
  connection.write(body.slice(8000));
  connection.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
  await connection.until(() => connection.closed || isCompleteResponse(connection.responses()[1]));
  if (connection.responses().length > 1) t.true(connection.responses()[1].startsWith("HTTP/1.1 200 "));
  else t.regex(first, /\r\nconnection: close\r\n/i, "a connection the server leaves is announced closed");
}

test("a 413 sent while the body arrives leaves a working or a closed connection, never a dead one", async (t) => {
  await answerWhileBodyArrives(
    t,
    { authorization: t.context.server.adminAuthorization, "content-type": "application/json" },
    413,
  );
});

test("a 413 for a chunked body past the limit leaves a working or a closed connection", async (t) => {
  await answerWhileBodyArrives(
    t,
    { authorization: t.context.server.adminAuthorization, "content-type": "application/json" },
    413,
    { chunked: true },
  );
});

test("a 401 sent before the body is read leaves a working or a closed connection", async (t) => {
  await answerWhileBodyArrives(t, { "content-type": "application/json" }, 401);
});

test("a 415 for a compressed body leaves a working or a closed connection", async (t) => {
  await answerWhileBodyArrives(
    t,
    {
      authorization: t.context.server.adminAuthorization,
      "content-type": "application/json",
      "content-encoding": "gzip",
    },
    415,
  );
});

test("an error answered after the whole body arrived keeps the connection alive", async (t) => {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  const body = "{nope";
  connection.write(
    `POST ${PRODUCTS} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${t.context.server.adminAuthorization}\r\n` +
      `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}` +
      "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n",
  );
  await connection.until(() => isCompleteResponse(connection.responses()[1]));
  t.true(connection.responses()[0].startsWith("HTTP/1.1 400 "));
  t.true(connection.responses()[1].startsWith("HTTP/1.1 200 "));
  t.false(connection.closed);
});

test("an error answered to a request without a body keeps the connection alive", async (t) => {
  const connection = await RawConnection.open(t.context.server.port);
  t.teardown(() => connection.close());
  connection.write(
    `GET ${PRODUCTS} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`,
  );
  await connection.until(() => isCompleteResponse(connection.responses()[1]));
  t.true(connection.responses()[0].startsWith("HTTP/1.1 401 "));
  t.notRegex(connection.responses()[0], /\r\nconnection: close\r\n/i);
  t.true(connection.responses()[1].startsWith("HTTP/1.1 200 "));
  t.false(connection.closed);
});

for (const [size, outcome] of [
  [20_000, "kept"],
  [1_100_000, "closed"],
] as const) {
  test(`a gRPC-Web body of ${size} bytes over the limit leaves the connection ${outcome}, not dead`, async (t) => {
    const connection = await RawConnection.open(t.context.server.port);
    t.teardown(() => connection.close());
    const message = Buffer.from(JSON.stringify({ productCode: "WEB", name: "x".repeat(size) }));
    const frame = Buffer.concat([Buffer.from([0]), Buffer.alloc(4), message]);
    frame.writeUInt32BE(message.length, 1);
    connection.write(
      `POST /provision.v1.CatalogService/CreateProduct HTTP/1.1\r\nhost: 127.0.0.1\r\n` +
        `authorization: ${t.context.server.adminAuthorization}\r\ncontent-type: application/grpc-web+json\r\n` +
        `content-length: ${frame.length}\r\n\r\n${frame.toString("latin1")}` +
        "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n",
    );
    await connection.until(() => connection.closed || isCompleteResponse(connection.responses()[1]));
    const [first, second] = connection.responses();
    t.regex(first, /grpc-status: 8/, "resource_exhausted");
    if (outcome === "kept") {
      t.true(second?.startsWith("HTTP/1.1 200 "), second?.slice(0, 80));
      t.false(connection.closed);
    } else {
      t.regex(first, /\r\nconnection: close\r\n/i, "a connection the server leaves is announced closed");
      t.true(connection.closed);
    }
  });
}

test("a request sent on an idle keep-alive connection as shutdown begins is answered, with Connection: close", async (t) => {
  const server = await startTestServer();
  const connection = await RawConnection.open(server.port);
  t.teardown(() => connection.close());
  const healthz = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
  connection.write(healthz);
  await connection.until(() => isCompleteResponse(connection.responses()[0]));
  const closing = server.close(); // the connection is idle now
  connection.write(healthz);
  await connection.until(() => isCompleteResponse(connection.responses()[1]) || connection.closed);
  const [, second] = connection.responses();
  t.truthy(second, "answered, not reset");
  t.true(second.startsWith("HTTP/1.1 200 "), second.slice(0, 80));
  t.regex(second, /\r\nconnection: close\r\n/i);
  await closing;
  await connection.until(() => connection.closed);
});
