import { randomUUID } from "node:crypto";
import { once } from "node:events";
import http2 from "node:http2";
import net from "node:net";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { create, fromBinary, fromJsonString, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import anyTest, { type TestFn } from "ava";
import {
  CatalogService,
  type GetProductRequest,
  GetProductRequestSchema,
  GetProductResponseSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import { createLogger } from "../../src/platform/logger.js";
import { listen, type RunningServer } from "../../src/server/http-server.js";
import { createInProcessInvoker, implementation } from "../../src/server/in-process-rpc.js";
import { createRpcHandler } from "../../src/server/rpc-adapter.js";
import { pollUntil } from "../support/poll.js";
import { type Exchange, envelope, http1Exchange, http2Exchange } from "../support/raw-rpc.js";

/**
 * RPC handlers built here around one small implementation of GetProduct that sets response headers and
 * trailers, reports the protocol and deadline its context names, fails on request and can be slow: one
 * handler with the fast path (its invoker records the request ids it was called for), one without.
 */
interface Context {
  fast: Served;
  connect: Served;
  invoked: Set<string>;
}

interface Served {
  server: RunningServer;
  baseUrl: string;
  logs: string[];
}

const test = anyTest as TestFn<Context>;
const GET_PRODUCT = "/provision.v1.CatalogService/GetProduct";

const service = implementation(CatalogService, {
  async getProduct(request: GetProductRequest, context: HandlerContext) {
    context.responseHeader.set("x-impl", "header");
    context.responseTrailer.append("x-impl-trailer", "one");
    context.responseTrailer.append("x-impl-trailer", "two");
    if (request.productId === "missing") {
      throw new ConnectError("no such product", Code.NotFound, { "x-error": "metadata" }, [
        { desc: ProblemDetailsSchema, value: { type: "https://example.test/not-found", title: "Not Found" } },
      ]);
    }
    if (request.productId === "slow") await delay(300);
    const deadline = context.timeoutMs();
    return {
      product: {
        id: request.productId,
        name: context.protocolName,
        description: deadline === undefined ? "no deadline" : `deadline ${deadline > 0 && deadline <= 5000}`,
      },
    };
  },
});

async function serve(fastPath: boolean, invoked: Set<string>): Promise<Served> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      logs.push(...String(chunk).split("\n").filter(Boolean));
      callback();
    },
  });
  const logger = createLogger("debug", sink);
  const invoke = createInProcessInvoker([service], []);
  const handler = createRpcHandler({
    logger,
    routes: (router) => router.service(CatalogService, service[1] as never),
    fallback: (_request, response) => {
      response.statusCode = 404;
      response.end();
    },
    invoke: fastPath
      ? (method, call) => {
          invoked.add(call.header.get("x-request-id") ?? "");
          return invoke(method, call);
        }
      : undefined,
  });
  const server = await listen(
    (request, response) => {
      handler(request, response);
      return undefined;
    },
    { host: "127.0.0.1", port: 0, logger },
  );
  return { server, baseUrl: `http://127.0.0.1:${server.port}`, logs };
}

test.before(async (t) => {
  t.context.invoked = new Set();
  t.context.fast = await serve(true, t.context.invoked);
  t.context.connect = await serve(false, t.context.invoked);
});

test.after.always(async (t) => {
  await t.context.fast?.server.close(100);
  await t.context.connect?.server.close(100);
});

type Send = (baseUrl: string, headers: Record<string, string>) => Promise<Exchange>;

async function both(t: { context: Context }, send: Send) {
  const id = randomUUID();
  const fast = await send(t.context.fast.baseUrl, { "x-request-id": id });
  const connect = await send(t.context.connect.baseUrl, { "x-request-id": id });
  return { fast, connect, tookFastPath: t.context.invoked.has(id) };
}

const connectCall =
  (productId: string, headers: Record<string, string> = {}): Send =>
  (baseUrl, extra) =>
    http1Exchange(
      baseUrl,
      GET_PRODUCT,
      { "content-type": "application/json", ...headers, ...extra },
      Buffer.from(JSON.stringify({ productId })),
    );

const grpcCall =
  (productId: string, headers: Record<string, string> = {}): Send =>
  (baseUrl, extra) =>
    http2Exchange(
      baseUrl,
      GET_PRODUCT,
      { "content-type": "application/grpc", te: "trailers", ...headers, ...extra },
      envelope(toBinary(GetProductRequestSchema, create(GetProductRequestSchema, { productId }))),
    );

test("Connect: the implementation's headers, trailers (as trailer- headers) and protocol, on both paths", async (t) => {
  const answers = await both(t, connectCall("p-1"));
  t.true(answers.tookFastPath);
  t.deepEqual(answers.fast, answers.connect);
  t.is(answers.fast.headers["x-impl"], "header");
  t.is(answers.fast.headers["trailer-x-impl-trailer"], "one, two");
  const product = fromJsonString(GetProductResponseSchema, Buffer.from(answers.fast.body, "base64").toString()).product;
  t.is(product?.name, "connect");
  t.is(product?.description, "no deadline");
});

test("Connect: an error with metadata and details keeps the implementation's headers, on both paths", async (t) => {
  const answers = await both(t, connectCall("missing"));
  t.true(answers.tookFastPath);
  t.deepEqual(answers.fast, answers.connect);
  t.is(answers.fast.status, 404);
  t.is(answers.fast.headers["x-error"], "metadata");
  t.is(answers.fast.headers["x-impl"], "header");
  const error = JSON.parse(Buffer.from(answers.fast.body, "base64").toString());
  t.is(error.code, "not_found");
  t.is(error.details[0].type, "provision.v1.ProblemDetails");
});

test("Connect: the implementation sees the client's deadline, on both paths", async (t) => {
  const answers = await both(t, connectCall("p-2", { "connect-timeout-ms": "5000" }));
  t.true(answers.tookFastPath);
  t.deepEqual(answers.fast, answers.connect);
  const product = fromJsonString(GetProductResponseSchema, Buffer.from(answers.fast.body, "base64").toString()).product;
  t.is(product?.description, "deadline true");
});

test("gRPC: the implementation's headers, trailers and protocol, on both paths", async (t) => {
  const answers = await both(t, grpcCall("p-3", { "grpc-timeout": "5S" }));
  t.true(answers.tookFastPath);
  t.deepEqual(answers.fast, answers.connect);
  t.is(answers.fast.headers["x-impl"], "header");
  t.is(answers.fast.trailers["x-impl-trailer"], "one, two");
  t.is(answers.fast.trailers["grpc-status"], "0");
  const product = fromBinary(GetProductResponseSchema, Buffer.from(answers.fast.body, "base64").subarray(5)).product;
  t.is(product?.name, "grpc");
  t.is(product?.description, "deadline true");
});

test("gRPC: an error with metadata and details as trailers, on both paths", async (t) => {
  const answers = await both(t, grpcCall("missing"));
  t.true(answers.tookFastPath);
  t.deepEqual(answers.fast, answers.connect);
  t.is(answers.fast.body, "");
  t.is(answers.fast.trailers["grpc-status"], String(Code.NotFound));
  t.is(answers.fast.trailers["grpc-message"], "no%20such%20product");
  t.is(answers.fast.trailers["x-error"], "metadata");
  t.truthy(answers.fast.trailers["grpc-status-details-bin"]);
});

/** Opens a raw HTTP/1.1 connection and sends `text`. */
async function rawHttp1(baseUrl: string, text: string): Promise<net.Socket> {
  const socket = net.connect(Number(new URL(baseUrl).port), "127.0.0.1");
  await once(socket, "connect");
  socket.on("error", () => undefined);
  socket.write(text);
  return socket;
}

function errorLines(logs: string[]): string[] {
  return logs.filter((line) => JSON.parse(line).level >= 50 || line.includes("RPC handler failed"));
}

test("a client gone mid-body or mid-call is no error, and the server goes on answering", async (t) => {
  const { fast, invoked } = t.context;
  const invokedFor = (id: string) =>
    pollUntil("the call to reach the implementation", async () => invoked.has(id) || undefined, {
      timeoutMs: 5000,
      intervalMs: 5,
    });
  const head = (id: string, length: number) =>
    `POST ${GET_PRODUCT} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Request-Id: ${id}\r\n` +
    `Content-Length: ${length}\r\n\r\n`;

  const midBody = await rawHttp1(fast.baseUrl, `${head(randomUUID(), 100)}{"productId"`);
  await delay(50);
  midBody.destroy();

  const slowBody = JSON.stringify({ productId: "slow" });
  const midCallId = randomUUID();
  const midCall = await rawHttp1(fast.baseUrl, head(midCallId, slowBody.length) + slowBody);
  await invokedFor(midCallId);
  midCall.destroy();

  const session = http2.connect(fast.baseUrl);
  session.on("error", () => undefined);
  const midStreamId = randomUUID();
  const stream = session.request({
    ":method": "POST",
    ":path": GET_PRODUCT,
    "content-type": "application/grpc",
    "x-request-id": midStreamId,
  });
  stream.on("error", () => undefined);
  stream.end(envelope(toBinary(GetProductRequestSchema, create(GetProductRequestSchema, { productId: "slow" }))));
  await invokedFor(midStreamId);
  stream.close(http2.constants.NGHTTP2_CANCEL);
  const halfSent = session.request({ ":method": "POST", ":path": GET_PRODUCT, "content-type": "application/grpc" });
  halfSent.on("error", () => undefined);
  halfSent.write(Buffer.from([0, 0, 0, 0, 40]));
  await delay(50);
  halfSent.close(http2.constants.NGHTTP2_CANCEL);

  // The slow calls end 300 ms after they began, and their answers find no client.
  await delay(400);
  session.close();
  t.deepEqual(errorLines(fast.logs), []);
  const after = await both(t, connectCall("p-4"));
  t.is(after.fast.status, 200);
  t.true(after.tookFastPath);
});
