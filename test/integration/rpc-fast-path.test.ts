import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";
import { create, type DescMethod, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import {
  CatalogService,
  CreateProductRequestSchema,
  type CreateProductResponse,
  FeatureSchema,
  GetProductRequestSchema,
  type GetProductResponse,
  UpdateProductRequestSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import type { RpcHandlerOptions } from "../../src/server/rpc-adapter.js";
import { authorizationMetadata, bearerWithScopes } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { pollUntil } from "../support/poll.js";
import { type Exchange, envelope, http1Exchange, http2Exchange } from "../support/raw-rpc.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

/**
 * Two instances on one database: `fast` answers the common unary call itself, `connect` (no in-process invoker)
 * sends every call through connect-node, as before the fast path. Every exchange carries its own request id;
 * the fast instance's invoker records the ids it was called for, which tells which path a call took.
 */
interface Context {
  fast: TestServer;
  connect: TestServer;
  drop(): Promise<void>;
  /** Request ids the fast instance's in-process invoker was called for. */
  invoked: Set<string>;
  small: string;
  /** A product whose GetProduct answer is over 1 KiB. */
  large: string;
  readOnly: string;
}

const test = anyTest as TestFn<Context>;

const GET_PRODUCT = "/provision.v1.CatalogService/GetProduct";
const CREATE_PRODUCT = "/provision.v1.CatalogService/CreateProduct";
const UPDATE_PRODUCT = "/provision.v1.CatalogService/UpdateProduct";

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  const invoked = new Set<string>();
  t.context.invoked = invoked;
  const spy = (options: RpcHandlerOptions): RpcHandlerOptions => {
    const invoke = options.invoke;
    if (!invoke) throw new Error("the app builds its RPC handler with an in-process invoker");
    return {
      ...options,
      invoke: (method, call) => {
        invoked.add(call.header.get("x-request-id") ?? "");
        return invoke(method, call);
      },
    };
  };
  t.context.fast = await startTestServer({ databaseUrl: database.url, rpc: spy });
  t.context.connect = await startTestServer({
    databaseUrl: database.url,
    rpc: (options) => ({ ...options, invoke: undefined }),
  });
  const client = grpcClient(CatalogService, `127.0.0.1:${t.context.connect.port}`);
  const admin = authorizationMetadata(t.context.fast.adminAuthorization);
  const createProduct = async (productCode: string, description: string) => {
    const request = create(CreateProductRequestSchema, { productCode, name: productCode, description });
    return (await client.call<CreateProductResponse>("createProduct", request, admin)).product?.id ?? "";
  };
  t.context.small = await createProduct("FAST-SMALL", "small");
  t.context.large = await createProduct("FAST-LARGE", "a long description ".repeat(100));
  client.close();
  t.context.readOnly = await bearerWithScopes(t.context.fast, ["clients:read"]);
});

test.after.always(async (t) => {
  await t.context.fast?.close();
  await t.context.connect?.close();
  await t.context.drop?.();
});

type Wire = "http1" | "http2";

interface Call {
  wire: Wire;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** The same call to both instances: their answers, and whether the fast instance took its fast path. */
async function both(
  t: ExecutionContext<Context>,
  call: Call,
): Promise<{ fast: Exchange; connect: Exchange; tookFastPath: boolean }> {
  const exchange = call.wire === "http1" ? http1Exchange : http2Exchange;
  const id = randomUUID();
  const send = (server: TestServer) =>
    exchange(server.baseUrl, call.path, { ...call.headers, "x-request-id": id }, call.body);
  const fast = await send(t.context.fast);
  const connect = await send(t.context.connect);
  return { fast, connect, tookFastPath: t.context.invoked.has(id) };
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const proto = <T extends Parameters<typeof toBinary>[0]>(schema: T, init: Parameters<typeof create<T>>[1]) =>
  Buffer.from(toBinary(schema, create(schema, init)));
const CONNECT_JSON = { "content-type": "application/json" };
const CONNECT_PROTO = { "content-type": "application/proto" };
const GRPC = { "content-type": "application/grpc", te: "trailers" };

interface Case {
  name: string;
  call: (context: Context) => Call;
  /** Whether the fast path answers it (false: it is connect-node's). */
  fast: boolean;
  /** The HTTP status (Connect) or grpc-status (gRPC) both must answer. */
  expect: number;
}

const auth = (context: Context) => ({ authorization: context.fast.adminAuthorization });

const CASES: Case[] = [
  {
    name: "Connect JSON over HTTP/1.1: a product",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, ...auth(c) },
      body: json({ productId: c.small }),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect JSON over HTTP/1.1 with protocol version and charset: a product",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { "content-type": "application/json; charset=utf-8", "connect-protocol-version": "1", ...auth(c) },
      body: json({ productId: c.small }),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect binary over HTTP/2: a product",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...CONNECT_PROTO, ...auth(c) },
      body: proto(GetProductRequestSchema, { productId: c.small }),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect: not found",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, ...auth(c) },
      body: json({ productId: randomUUID() }),
    }),
    fast: true,
    expect: 404,
  },
  {
    name: "Connect: no token is unauthenticated, with its challenge",
    call: () => ({ wire: "http1", path: GET_PRODUCT, headers: CONNECT_JSON, body: json({ productId: randomUUID() }) }),
    fast: true,
    expect: 401,
  },
  {
    name: "Connect: a token without the scope is permission_denied",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, authorization: c.readOnly },
      body: json({ productId: c.small }),
    }),
    fast: true,
    expect: 403,
  },
  {
    name: "Connect: a validation failure is invalid_argument with its details",
    call: (c) => ({
      wire: "http1",
      path: CREATE_PRODUCT,
      headers: { ...CONNECT_JSON, ...auth(c) },
      body: json({ productCode: " " }),
    }),
    fast: true,
    expect: 400,
  },
  {
    name: "Connect: over a list's cap is invalid_argument",
    call: (c) => ({
      wire: "http1",
      path: UPDATE_PRODUCT,
      headers: { ...CONNECT_JSON, ...auth(c) },
      body: json({ productId: c.small, features: Array.from({ length: 1001 }, () => ({})) }),
    }),
    // Refused from its encoded bytes by the fast path, before any call (wire-limits.ts): nothing is invoked.
    fast: false,
    expect: 400,
  },
  {
    name: "Connect: a deadline header",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, "connect-timeout-ms": "5000", ...auth(c) },
      body: json({ productId: c.small }),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect: over 1 KiB is gzipped for a client that accepts it",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, "accept-encoding": "gzip", ...auth(c) },
      body: json({ productId: c.large }),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect: malformed protobuf is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http1",
      path: CREATE_PRODUCT,
      headers: { ...CONNECT_PROTO, ...auth(c) },
      body: Buffer.from([0x0a, 0x05, 0x41]),
    }),
    fast: false,
    expect: 400,
  },
  {
    name: "Connect: JSON that is not JSON is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http1",
      path: CREATE_PRODUCT,
      headers: { ...CONNECT_JSON, ...auth(c) },
      body: Buffer.from("{nope"),
    }),
    fast: false,
    expect: 400,
  },
  {
    name: "Connect: a gzip request is inflated on the fast path",
    call: (c) => ({
      wire: "http1",
      path: GET_PRODUCT,
      headers: { ...CONNECT_JSON, "content-encoding": "gzip", ...auth(c) },
      body: gzipSync(json({ productId: c.small })),
    }),
    fast: true,
    expect: 200,
  },
  {
    name: "Connect: a body declared over the limit is connect-node's resource_exhausted",
    call: (c) => ({
      wire: "http1",
      path: CREATE_PRODUCT,
      headers: { ...CONNECT_PROTO, ...auth(c) },
      body: Buffer.alloc(1024 * 1024 + 1),
    }),
    fast: false,
    expect: 429,
  },
  {
    name: "Connect over HTTP/2: a body that grows over the limit is connect-node's resource_exhausted",
    call: (c) => ({
      wire: "http2",
      path: CREATE_PRODUCT,
      headers: { ...CONNECT_PROTO, ...auth(c) },
      body: Buffer.alloc(1024 * 1024 + 1),
    }),
    fast: false,
    expect: 429,
  },
  {
    name: "gRPC: a product",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "grpc-accept-encoding": "identity,deflate,gzip", ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: c.small })),
    }),
    fast: true,
    expect: 0,
  },
  {
    name: "gRPC+JSON: a product",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "content-type": "application/grpc+json", ...auth(c) },
      body: envelope(json({ productId: c.small })),
    }),
    fast: true,
    expect: 0,
  },
  {
    name: "gRPC: over 1 KiB is a gzipped message for a client that accepts it",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "grpc-accept-encoding": "gzip", ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: c.large })),
    }),
    fast: true,
    expect: 0,
  },
  {
    name: "gRPC: not found",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: randomUUID() })),
    }),
    fast: true,
    expect: grpc.status.NOT_FOUND,
  },
  {
    name: "gRPC: no token is unauthenticated",
    call: () => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: GRPC,
      body: envelope(proto(GetProductRequestSchema, {})),
    }),
    fast: true,
    expect: grpc.status.UNAUTHENTICATED,
  },
  {
    name: "gRPC: over a list's cap is invalid_argument",
    call: (c) => ({
      wire: "http2",
      path: UPDATE_PRODUCT,
      headers: { ...GRPC, ...auth(c) },
      body: envelope(
        proto(UpdateProductRequestSchema, {
          productId: c.small,
          features: Array.from({ length: 1001 }, () => create(FeatureSchema)),
        }),
      ),
    }),
    // Refused from its encoded bytes by the fast path, before any call (wire-limits.ts): nothing is invoked.
    fast: false,
    expect: grpc.status.INVALID_ARGUMENT,
  },
  {
    name: "gRPC: a deadline",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "grpc-timeout": "5S", ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: c.small })),
    }),
    fast: true,
    expect: 0,
  },
  {
    name: "gRPC: a deadline that is not one is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "grpc-timeout": "soon", ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: c.small })),
    }),
    fast: false,
    expect: grpc.status.INVALID_ARGUMENT,
  },
  {
    name: "gRPC: malformed protobuf is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http2",
      path: CREATE_PRODUCT,
      headers: { ...GRPC, ...auth(c) },
      body: envelope(Buffer.from([0x0a, 0x05, 0x41])),
    }),
    fast: false,
    expect: grpc.status.INVALID_ARGUMENT,
  },
  {
    name: "gRPC: a compressed flag without grpc-encoding is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, ...auth(c) },
      body: envelope(gzipSync(proto(GetProductRequestSchema, { productId: c.small })), 1),
    }),
    fast: false,
    expect: grpc.status.INVALID_ARGUMENT,
  },
  {
    // connect-node's word for it (rpc-client-mistakes.ts leaves it as it is).
    name: "gRPC: two messages are connect-node's unimplemented",
    call: (c) => {
      const message = envelope(proto(GetProductRequestSchema, { productId: c.small }));
      return {
        wire: "http2",
        path: GET_PRODUCT,
        headers: { ...GRPC, ...auth(c) },
        body: Buffer.concat([message, message]),
      };
    },
    fast: false,
    expect: grpc.status.UNIMPLEMENTED,
  },
  {
    name: "gRPC: a truncated envelope is connect-node's invalid_argument",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, ...auth(c) },
      body: envelope(proto(GetProductRequestSchema, { productId: c.small })).subarray(0, 10),
    }),
    fast: false,
    expect: grpc.status.INVALID_ARGUMENT,
  },
  {
    name: "gRPC: a gzip request is inflated on the fast path",
    call: (c) => ({
      wire: "http2",
      path: GET_PRODUCT,
      headers: { ...GRPC, "grpc-encoding": "gzip", ...auth(c) },
      body: envelope(gzipSync(proto(GetProductRequestSchema, { productId: c.small })), 1),
    }),
    fast: true,
    expect: 0,
  },
];

for (const { name, call, fast, expect } of CASES) {
  test(`same answer on both paths — ${name}`, async (t) => {
    const sent = call(t.context);
    const answers = await both(t, sent);
    t.deepEqual(answers.fast, answers.connect);
    t.is(answers.tookFastPath, fast, fast ? "the fast path answers it" : "connect-node answers it");
    const grpcCall = sent.headers["content-type"].startsWith("application/grpc");
    const status = grpcCall
      ? Number(answers.fast.trailers["grpc-status"] ?? answers.fast.headers["grpc-status"])
      : answers.fast.status;
    t.is(status, expect, JSON.stringify(answers.fast));
  });
}

test("a response over 1 KiB is compressed only for a client that accepts it", async (t) => {
  const { large } = t.context;
  const gzipped = await both(t, CASES.find((c) => c.name.startsWith("Connect: over 1 KiB"))?.call(t.context) as Call);
  t.is(gzipped.fast.headers["content-encoding"], "gzip");
  const plain = await both(t, {
    wire: "http1",
    path: GET_PRODUCT,
    headers: { ...CONNECT_JSON, ...auth(t.context) },
    body: json({ productId: large }),
  });
  t.false("content-encoding" in plain.fast.headers);
  t.true(Buffer.from(plain.fast.body, "base64").length >= 1024);

  const grpcGzipped = await both(t, CASES.find((c) => c.name.startsWith("gRPC: over 1 KiB"))?.call(t.context) as Call);
  t.is(grpcGzipped.fast.headers["grpc-encoding"], "gzip");
  t.is(Buffer.from(grpcGzipped.fast.body, "base64")[0], 1, "the message is flagged compressed");
});

// ---------------------------------------------------------------------------------------------------------------
// Real clients: grpc-js and connect-node's transports see the same results from both instances.

/** Sends `authorization` and a request id of the caller's choosing. */
function sending(headers: Record<string, string>): Interceptor {
  return (next) => (request) => {
    for (const [name, value] of Object.entries(headers)) request.header.set(name, value);
    return next(request);
  };
}

type TransportKind = "connect-json" | "connect-binary" | "grpc";

function transportTo(
  server: TestServer,
  kind: TransportKind,
  headers: Record<string, string>,
  gzip = false,
): Transport {
  const interceptors = [sending(headers)];
  const compression = gzip ? { sendCompression: compressionGzip, compressMinBytes: 1 } : {};
  if (kind === "grpc") return createGrpcTransport({ baseUrl: server.baseUrl, interceptors, ...compression });
  return createConnectTransport({
    baseUrl: server.baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: kind === "connect-binary",
    interceptors,
    ...compression,
  });
}

/** What a Connect client learns from a call: the message, or the error's code, message, details and metadata. */
async function outcomeOf(call: () => Promise<GetProductResponse>) {
  try {
    return { message: await call() };
  } catch (reason) {
    const error = ConnectError.from(reason);
    const metadata = [...error.metadata].filter(([name]) => !["date", "x-request-id"].includes(name));
    return { code: error.code, message: error.rawMessage, details: error.findDetails(ProblemDetailsSchema), metadata };
  }
}

for (const kind of ["connect-json", "connect-binary", "grpc"] as const) {
  for (const gzip of [false, true]) {
    test(`${kind}${gzip ? ", gzip requests" : ""}: a connect-node client gets the same results from both paths`, async (t) => {
      const { fast, connect, small, invoked } = t.context;
      const cases: [string, Record<string, string>, string][] = [
        ["found", { authorization: fast.adminAuthorization }, small],
        ["not found", { authorization: fast.adminAuthorization }, randomUUID()],
        ["unauthenticated", {}, small],
      ];
      for (const [what, headers, productId] of cases) {
        const id = randomUUID();
        const ask = (server: TestServer) =>
          outcomeOf(() =>
            createClient(
              CatalogService,
              transportTo(server, kind, { ...headers, "x-request-id": id }, gzip),
            ).getProduct({
              productId,
            }),
          );
        const viaFast = await ask(fast);
        t.deepEqual(viaFast, await ask(connect), what);
        t.true(invoked.has(id), `${what}: the fast path answers it, gzip requests too`);
        if ("message" in viaFast && typeof viaFast.message !== "string") t.is(viaFast.message.product?.id, small);
        else if ("code" in viaFast) t.is(viaFast.code, what === "not found" ? Code.NotFound : Code.Unauthenticated);
        t.is("code" in viaFast, what !== "found");
      }
    });
  }
}

/** What grpc-js learns from a call: the message, or the status, details and metadata. */
function grpcJsOutcome(
  server: TestServer,
  metadata: grpc.Metadata,
  productId: string,
  options: grpc.CallOptions,
  channel: grpc.ChannelOptions,
) {
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), channel);
  const method = CatalogService.method.getProduct as DescMethod;
  const serialize = (message: unknown) => Buffer.from(toBinary(GetProductRequestSchema, message as never));
  const identity = (bytes: Buffer) => bytes;
  return new Promise<unknown>((resolve) => {
    client.makeUnaryRequest(
      `/${method.parent.typeName}/${method.name}`,
      serialize,
      identity,
      create(GetProductRequestSchema, { productId }),
      metadata,
      options,
      (error, response) => {
        client.close();
        if (!error) resolve({ bytes: response?.toString("base64") });
        else {
          const { date: _, ...rest } = error.metadata.getMap();
          resolve({ code: error.code, details: error.details, metadata: rest });
        }
      },
    );
  });
}

for (const [what, options, channel, fast] of [
  ["plain", {}, {}, true],
  ["with a deadline", { deadline: Date.now() + 60_000 }, {}, true],
  ["gzip requests", {}, { "grpc.default_compression_algorithm": 2 }, true],
] as const) {
  test(`grpc-js (${what}): the same results from both paths`, async (t) => {
    const { fast: fastServer, connect, small, invoked } = t.context;
    for (const [productId, authorization] of [
      [small, fastServer.adminAuthorization],
      [randomUUID(), fastServer.adminAuthorization],
      [small, ""],
    ]) {
      const id = randomUUID();
      const metadata = new grpc.Metadata();
      metadata.set("x-request-id", id);
      if (authorization) metadata.set("authorization", authorization);
      const viaFast = await grpcJsOutcome(fastServer, metadata, productId, options, channel);
      t.deepEqual(viaFast, await grpcJsOutcome(connect, metadata, productId, options, channel));
      t.is(invoked.has(id), fast);
    }
  });
}

test("a call on the fast path keeps its request id and its one log line", async (t) => {
  const { fast, small, invoked } = t.context;
  const id = randomUUID();
  const response = await fetch(fast.baseUrl + GET_PRODUCT, {
    method: "POST",
    headers: { ...CONNECT_JSON, ...auth(t.context), "x-request-id": id },
    body: JSON.stringify({ productId: small }),
  });
  t.is(response.status, 200);
  t.is(response.headers.get("x-request-id"), id);
  t.true(invoked.has(id));
  await response.arrayBuffer();
  const linesOf = () => fast.logs.map((line) => JSON.parse(line)).filter((line) => line.requestId === id);
  const lines = await pollUntil("the request's log line", async () => (linesOf().length > 0 ? linesOf() : undefined), {
    timeoutMs: 1000,
    intervalMs: 10,
  });
  t.is(lines.length, 1, JSON.stringify(lines));
  t.like(lines[0], { msg: "request", method: "POST", path: GET_PRODUCT, status: 200, httpVersion: "1.1" });
});

test("a cached answer is written once per format, and a change to the product is seen at once on every protocol", async (t) => {
  const { fast } = t.context;
  const headers = { authorization: fast.adminAuthorization };
  const clients = (["connect-json", "connect-binary", "grpc"] as const).map((kind) =>
    createClient(CatalogService, transportTo(fast, kind, headers)),
  );
  const created = await clients[0].createProduct({ productCode: `FAST-CHANGE-${randomUUID()}`, name: "before" });
  const productId = created.product?.id ?? "";
  const names = async () =>
    Promise.all(clients.map(async (client) => (await client.getProduct({ productId })).product?.name));
  t.deepEqual(await names(), ["before", "before", "before"]);
  t.deepEqual(await names(), ["before", "before", "before"], "again, from the cached answer");
  await clients[1].updateProduct({ productId, name: "after" });
  t.deepEqual(await names(), ["after", "after", "after"]);
  t.deepEqual(await names(), ["after", "after", "after"]);
});
