import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import test from "ava";
import { CatalogService } from "../../gen/provision/v1/catalog_pb.js";
import type { ServiceImplementation } from "../../src/server/in-process-rpc.js";
import { pollUntil } from "../support/poll.js";
import { type Exchange, envelope, http1Exchange, http2Exchange } from "../support/raw-rpc.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// A client's deadline (connect-timeout-ms, grpc-timeout) bounds the call on the server too: a call whose deadline
// has passed when its implementation would start is answered deadline_exceeded without running it, and one still
// running at its deadline is answered then.

const SLOW_MS = 1500;
let server: TestServer;
/** Product codes whose slow creation finished. */
const finished = new Set<string>();

/** CreateProduct takes SLOW_MS more for codes starting with SLOW. */
function slowCreations(implementations: ServiceImplementation[]): ServiceImplementation[] {
  return implementations.map(([service, impl]) => {
    if (service !== CatalogService) return [service, impl];
    const methods = impl as Record<string, (...args: any[]) => Promise<unknown>>;
    const createProduct = methods.createProduct;
    return [
      service,
      {
        ...methods,
        createProduct: async (request: { productCode: string }, context: unknown) => {
          if (request.productCode.startsWith("SLOW")) await sleep(SLOW_MS);
          if (request.productCode.startsWith("SLOW-FAIL")) throw new Error(`late failure of ${request.productCode}`);
          const created = await createProduct(request, context);
          finished.add(request.productCode);
          return created;
        },
      },
    ];
  });
}

test.before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "provision-deadlines-"));
  server = await startTestServer({ embedded: { file: path.join(dir, "provision.sqlite") }, services: slowCreations });
});
test.after.always(() => server?.close());

const CREATE = "/provision.v1.CatalogService/CreateProduct";

async function productExists(code: string): Promise<boolean> {
  const listed = await rest(server.baseUrl, "GET", `${PRODUCTS}?pageSize=100`);
  return (listed.body.items ?? listed.body.products ?? []).some(
    (product: { productCode: string }) => product.productCode === code,
  );
}

function connectCall(code: string, timeout: string): Promise<Exchange> {
  const headers = {
    "content-type": "application/json",
    authorization: server.adminAuthorization,
    "connect-timeout-ms": timeout,
  };
  return http1Exchange(server.baseUrl, CREATE, headers, Buffer.from(JSON.stringify({ productCode: code })));
}

function grpcCall(code: string, timeout: string, over: "http1" | "http2"): Promise<Exchange> {
  const headers = {
    "content-type": "application/grpc+json",
    te: "trailers",
    authorization: server.adminAuthorization,
    "grpc-timeout": timeout,
  };
  const body = envelope(Buffer.from(JSON.stringify({ productCode: code })));
  return over === "http1"
    ? http1Exchange(server.baseUrl, CREATE, headers, body)
    : http2Exchange(server.baseUrl, CREATE, headers, body);
}

function grpcStatusOf(exchange: Exchange): string | undefined {
  return (exchange.trailers["grpc-status"] ?? exchange.headers["grpc-status"]) as string | undefined;
}

test("Connect: a deadline already passed is answered deadline_exceeded and the call does not run", async (t) => {
  const answer = await connectCall("LATE-CONNECT", "0");
  t.is(answer.status, 504);
  t.is(JSON.parse(Buffer.from(answer.body, "base64").toString()).code, "deadline_exceeded");
  t.false(await productExists("LATE-CONNECT"));
});

for (const over of ["http2", "http1"] as const) {
  test(`gRPC over ${over}: a deadline already passed is answered DEADLINE_EXCEEDED and the call does not run`, async (t) => {
    const code = `LATE-GRPC-${over}`;
    const answer = await grpcCall(code, "0n", over);
    t.is(grpcStatusOf(answer), "4");
    t.false(await productExists(code));
  });
}

test("Connect: a call still running at its deadline is answered deadline_exceeded then", async (t) => {
  const answer = await connectCall("SLOW-CONNECT", "200");
  t.is(answer.status, 504);
  t.false(finished.has("SLOW-CONNECT"), "answered before the implementation finished");
});

test("gRPC: a call still running at its deadline is answered DEADLINE_EXCEEDED then", async (t) => {
  const answer = await grpcCall("SLOW-GRPC", "200m", "http2");
  t.is(grpcStatusOf(answer), "4");
  t.false(finished.has("SLOW-GRPC"), "answered before the implementation finished");
});

test("a call that ends within its deadline is answered as usual", async (t) => {
  const answer = await connectCall("IN-TIME", "10000");
  t.is(answer.status, 200);
  t.true(await productExists("IN-TIME"));
});

test("a deadline too far off for a timer is as good as none, on both paths", async (t) => {
  // Slow calls: a deadline taken at face value would end them after Node's longest timer wraps (1 ms).
  const [connect, grpc] = await Promise.all([
    connectCall("SLOW-FAR-CONNECT", "9999999999"),
    grpcCall("SLOW-FAR-GRPC", "99999999H", "http1"),
  ]);
  t.is(connect.status, 200);
  t.is(grpcStatusOf(grpc), "0");
  t.true(await productExists("SLOW-FAR-CONNECT"));
  t.true(await productExists("SLOW-FAR-GRPC"));
});

test("a call that fails after its deadline was answered is still logged", async (t) => {
  const answer = await connectCall("SLOW-FAIL-1", "100");
  t.is(answer.status, 504);
  await pollUntil(
    "the late failure is logged",
    () => (server.logs.some((line) => line.includes("late failure of SLOW-FAIL-1")) ? true : undefined),
    { timeoutMs: SLOW_MS + 5000 },
  );
  t.pass();
});

test("Connect: the deadline counts the time the body takes to arrive", async (t) => {
  const body = Buffer.from(JSON.stringify({ productCode: "LATE-BODY" }));
  const request = http.request(new URL(CREATE, server.baseUrl), {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "content-length": String(body.length),
      authorization: server.adminAuthorization,
      "connect-timeout-ms": "300",
    },
  });
  request.write(body.subarray(0, 5));
  await sleep(600);
  request.end(body.subarray(5));
  const [response] = (await once(request, "response")) as [http.IncomingMessage];
  response.resume();
  t.is(response.statusCode, 504);
  t.false(await productExists("LATE-BODY"));
});
