import { randomUUID } from "node:crypto";
import { once } from "node:events";
import net from "node:net";
import anyTest, { type TestFn } from "ava";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** The status of one raw HTTP/1.1 GET of `target`, sent as is. */
async function statusOf(port: number, target: string): Promise<number> {
  const socket = net.connect(port, "127.0.0.1");
  await once(socket, "connect");
  socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  let text = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    text += chunk;
  });
  await once(socket, "close");
  return Number(text.split(" ")[1]);
}

// The path is read without a URL when WHATWG URL would leave it as it is; the others still go through it.
for (const [target, status] of [
  ["/healthz", 200],
  ["/healthz?verbose=1", 200],
  ["/api/../healthz", 200],
  ["/api/%2e%2e/healthz", 200],
  ["/api/./../healthz", 200],
  ["/%68ealthz", 404],
  ["/.well-known/../healthz", 200],
] as const) {
  test(`GET ${target} is routed as WHATWG URL reads it: ${status}`, async (t) => {
    t.is(await statusOf(t.context.server.port, target), status);
  });
}

test("every request writes exactly one line at info, on REST, Connect and the probes", async (t) => {
  const { server } = t.context;
  const sent = [
    { path: PRODUCTS, init: {} },
    {
      path: "/provision.v1.CatalogService/ListProducts",
      init: { method: "POST", headers: { "content-type": "application/json" }, body: "{}" },
    },
    { path: "/healthz", init: {} },
    { path: "/provision.v1.CatalogService/ListProducts", init: {} },
  ];
  for (const { path, init } of sent) {
    const requestId = randomUUID();
    const response = await fetch(server.baseUrl + path, {
      ...init,
      headers: { ...(init as { headers?: Record<string, string> }).headers, "x-request-id": requestId },
    });
    await response.arrayBuffer();
    const lines = () =>
      server.logs
        .map((line) => JSON.parse(line))
        .filter((entry) => entry.requestId === requestId && !["trace", "debug"].includes(entry.level));
    await pollUntil(`the log line of ${path}`, () => (lines().length > 0 ? true : undefined));
    t.is(lines().length, 1, `${path}: ${JSON.stringify(lines())}`);
    t.like(lines()[0], { msg: "request", path, status: response.status });
  }
});
