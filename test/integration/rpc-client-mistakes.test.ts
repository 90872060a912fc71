import { once } from "node:events";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { create, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { CatalogService, CreateProductRequestSchema } from "../../gen/provision/v1/catalog_pb.js";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer();
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

const CREATE_PRODUCT = "/provision.v1.CatalogService/CreateProduct";
const LIST_PRODUCTS = "/provision.v1.CatalogService/ListProducts";

/** Field 1, length-delimited, promising 5 bytes and carrying 1: not protobuf. */
const MALFORMED = Buffer.from([0x0a, 0x05, 0x41]);
/** A CreateProductRequest whose productCode is not UTF-8 (0xC3 starts a sequence 0x28 does not continue). */
const INVALID_UTF8 = (() => {
  const bytes = Buffer.from(
    toBinary(CreateProductRequestSchema, create(CreateProductRequestSchema, { productCode: "AB" })),
  );
  const at = bytes.indexOf("AB");
  bytes[at] = 0xc3;
  bytes[at + 1] = 0x28;
  return bytes;
})();
const TRUNCATED_GZIP = gzipSync(MALFORMED).subarray(0, 10);

/** A gRPC length-prefixed message: flags (1 = compressed), big-endian length, data. */
function envelope(flags: number, data: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

/** One unary call from a stock grpc-js client that sends `bytes` as the request message, as they are. */
function grpcJsCall(server: TestServer, path: string, bytes: Buffer): Promise<grpc.ServiceError | undefined> {
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("authorization", server.adminAuthorization);
  const identity = (data: Buffer) => data;
  return new Promise<grpc.ServiceError | undefined>((resolve) => {
    client.makeUnaryRequest(path, identity, identity, bytes, metadata, (error) => resolve(error ?? undefined));
  }).finally(() => client.close());
}

/** The gRPC status and message of one raw HTTP/2 gRPC request (trailers, or headers for trailers-only). */
async function rawGrpcCall(
  server: TestServer,
  headers: http2.OutgoingHttpHeaders,
  body: Buffer,
): Promise<{ status: string; message: string }> {
  const session = http2.connect(server.baseUrl);
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": CREATE_PRODUCT,
      "content-type": "application/grpc",
      te: "trailers",
      authorization: server.adminAuthorization,
      ...headers,
    });
    let metadata: http2.IncomingHttpHeaders = {};
    stream.on("response", (received) => {
      metadata = received;
    });
    stream.on("trailers", (received) => {
      metadata = { ...metadata, ...received };
    });
    stream.resume();
    stream.end(body);
    await once(stream, "close");
    return {
      status: String(metadata["grpc-status"]),
      message: decodeURIComponent(String(metadata["grpc-message"] ?? "")),
    };
  } finally {
    session.close();
  }
}

/** A Connect unary call over HTTP/1.1 with a body the client chose; answers the status and the error body. */
async function connectCall(
  server: TestServer,
  path: string,
  contentType: string,
  body: Buffer | string,
  headers: Record<string, string> = {},
): Promise<{ status: number; contentType: string | null; error: { code?: string; message?: string } }> {
  const response = await fetch(server.baseUrl + path, {
    method: "POST",
    headers: { "content-type": contentType, authorization: server.adminAuthorization, ...headers },
    body,
  });
  return {
    status: response.status,
    contentType: response.headers.get("content-type"),
    error: (await response.json()) as { code?: string; message?: string },
  };
}

function assertInvalidArgument(t: ExecutionContext, answer: Awaited<ReturnType<typeof connectCall>>, about: RegExp) {
  t.is(answer.status, 400, JSON.stringify(answer.error));
  t.is(answer.contentType, "application/json");
  t.is(answer.error.code, "invalid_argument");
  t.regex(answer.error.message ?? "", about);
}

test("gRPC: a message that is not protobuf is INVALID_ARGUMENT, not INTERNAL", async (t) => {
  const error = await grpcJsCall(t.context.server, CREATE_PRODUCT, MALFORMED);
  t.is(error?.code, grpc.status.INVALID_ARGUMENT, error?.details);
  t.regex(decodeURIComponent(error?.details ?? ""), /^parse binary: premature EOF/);
});

test("gRPC: invalid UTF-8 in a string field is INVALID_ARGUMENT", async (t) => {
  const error = await grpcJsCall(t.context.server, CREATE_PRODUCT, INVALID_UTF8);
  t.is(error?.code, grpc.status.INVALID_ARGUMENT, error?.details);
  t.regex(decodeURIComponent(error?.details ?? ""), /utf-8/i);
});

test("gRPC: a compressed message without grpc-encoding is INVALID_ARGUMENT", async (t) => {
  const answer = await rawGrpcCall(t.context.server, {}, envelope(1, gzipSync(MALFORMED)));
  t.is(answer.status, String(grpc.status.INVALID_ARGUMENT), answer.message);
  t.regex(answer.message, /compressed/);
});

for (const [what, data] of [
  ["not gzip", Buffer.from("not gzip at all")],
  ["truncated gzip", TRUNCATED_GZIP],
] as const) {
  test(`gRPC: a gzip message that does not decompress (${what}) is INVALID_ARGUMENT`, async (t) => {
    const answer = await rawGrpcCall(t.context.server, { "grpc-encoding": "gzip" }, envelope(1, data));
    t.is(answer.status, String(grpc.status.INVALID_ARGUMENT), answer.message);
    t.is(answer.message, "decompression failed");
  });
}

test("gRPC-Web: a message that is not protobuf answers grpc-status 3 in the trailer", async (t) => {
  const { server } = t.context;
  const response = await fetch(server.baseUrl + CREATE_PRODUCT, {
    method: "POST",
    headers: { "content-type": "application/grpc-web+proto", authorization: server.adminAuthorization },
    body: envelope(0, MALFORMED),
  });
  t.is(response.status, 200);
  const body = Buffer.from(await response.arrayBuffer());
  t.is(body[0], 0x80, "the body is the trailer alone");
  t.is(body.readUInt32BE(1), body.length - 5);
  const trailer = body.subarray(5).toString("utf8");
  t.regex(trailer, /^grpc-status: 3$/m, trailer);
  t.regex(trailer, /^grpc-message: parse%20binary/m, trailer);
});

test("Connect: a binary message that is not protobuf answers 400 invalid_argument", async (t) => {
  assertInvalidArgument(
    t,
    await connectCall(t.context.server, CREATE_PRODUCT, "application/proto", MALFORMED),
    /^parse binary/,
  );
});

test("Connect: invalid UTF-8 in a string field answers 400 invalid_argument", async (t) => {
  assertInvalidArgument(
    t,
    await connectCall(t.context.server, CREATE_PRODUCT, "application/proto", INVALID_UTF8),
    /utf-8/i,
  );
});

test("Connect: a gzip body that does not decompress answers 400 invalid_argument", async (t) => {
  const answer = await connectCall(t.context.server, LIST_PRODUCTS, "application/proto", TRUNCATED_GZIP, {
    "content-encoding": "gzip",
  });
  assertInvalidArgument(t, answer, /^decompression failed$/);
});

test("Connect: a JSON body that is not JSON answers 400 invalid_argument", async (t) => {
  assertInvalidArgument(t, await connectCall(t.context.server, CREATE_PRODUCT, "application/json", "{nope"), /JSON/);
});

test("a genuine server fault is still internal, on Connect and on gRPC", async (t) => {
  const server = await startTestServer();
  t.teardown(async () => {
    await server.app.dataSource.initialize();
    await server.close();
  });
  await server.app.dataSource.destroy();
  const listing = toBinary(CreateProductRequestSchema, create(CreateProductRequestSchema, { productCode: "FAULT" }));

  const connect = await connectCall(server, CREATE_PRODUCT, "application/proto", Buffer.from(listing));
  t.is(connect.status, 500, JSON.stringify(connect.error));
  t.is(connect.error.code, "internal");

  const error = await grpcJsCall(server, CREATE_PRODUCT, Buffer.from(listing));
  t.is(error?.code, grpc.status.INTERNAL, error?.details);
});

test("a message over BODY_LIMIT_BYTES is resource_exhausted with its ProblemDetails, on every protocol", async (t) => {
  const small = await startTestServer({ env: { BODY_LIMIT_BYTES: "2048" } });
  t.teardown(() => small.close());
  const transports = {
    connect: createConnectTransport({ baseUrl: small.baseUrl, httpVersion: "1.1" }),
    grpc: createGrpcTransport({ baseUrl: small.baseUrl }),
    grpcWeb: createGrpcWebTransport({ baseUrl: small.baseUrl, httpVersion: "1.1" }),
  };
  for (const [name, transport] of Object.entries(transports)) {
    const client = createClient(CatalogService, transport);
    const error = await t.throwsAsync(
      client.createProduct(
        { productCode: "BIG", description: "x".repeat(4096) },
        { headers: { authorization: small.adminAuthorization } },
      ),
    );
    const connectError = ConnectError.from(error);
    t.is(connectError.code, Code.ResourceExhausted, name);
    t.is(connectError.rawMessage, "the body exceeds 2048 bytes", name);
    t.is(connectError.findDetails(ProblemDetailsSchema)[0]?.type, "urn:provision:problem:body-too-large", name);
  }

  // Compressed small, over the limit once decompressed.
  const inflated = Buffer.from(JSON.stringify({ productCode: "BIG", description: "x".repeat(4096) }));
  const answer = await connectCall(small, CREATE_PRODUCT, "application/json", gzipSync(inflated), {
    "content-encoding": "gzip",
  });
  const compressed = errorFromJson(answer.error as JsonValue, undefined, new ConnectError("unreadable"));
  t.is(compressed.code, Code.ResourceExhausted);
  t.is(compressed.rawMessage, "the body exceeds 2048 bytes");
  t.is(compressed.findDetails(ProblemDetailsSchema)[0]?.type, "urn:provision:problem:body-too-large");
});

test("a message that is not protobuf carries the malformed-request ProblemDetails, on every protocol", async (t) => {
  const { server } = t.context;
  const problemOf = (error: ConnectError | undefined) => error?.findDetails(ProblemDetailsSchema)[0];
  const expected = { code: Code.InvalidArgument, type: "urn:provision:problem:malformed-request" };

  const connect = await connectCall(server, CREATE_PRODUCT, "application/proto", MALFORMED);
  const connectError = errorFromJson(connect.error as JsonValue, undefined, new ConnectError("unreadable"));
  t.deepEqual({ code: connectError.code, type: problemOf(connectError)?.type }, expected, "Connect");
  t.regex(connectError.rawMessage, /^parse binary/);

  const grpcJs = await grpcJsCall(server, CREATE_PRODUCT, MALFORMED);
  const details = grpcJs?.metadata.get("grpc-status-details-bin")[0] as Buffer | undefined;
  const grpcError = findTrailerError(
    new Headers({
      "grpc-status": String(grpcJs?.code),
      "grpc-message": encodeURIComponent(grpcJs?.details ?? ""),
      "grpc-status-details-bin": details?.toString("base64") ?? "",
    }),
  );
  t.deepEqual({ code: grpcError?.code, type: problemOf(grpcError)?.type }, expected, "gRPC");

  const response = await fetch(server.baseUrl + CREATE_PRODUCT, {
    method: "POST",
    headers: { "content-type": "application/grpc-web+proto", authorization: server.adminAuthorization },
    body: envelope(0, MALFORMED),
  });
  const body = Buffer.from(await response.arrayBuffer());
  const webError = findTrailerError(trailerParse(body.subarray(5)));
  t.deepEqual({ code: webError?.code, type: problemOf(webError)?.type }, expected, "gRPC-Web");
});

test("JSON that does not decode into the request carries the malformed-request ProblemDetails, Connect and gRPC-Web", async (t) => {
  const { server } = t.context;
  const expected = { code: Code.InvalidArgument, type: "urn:provision:problem:malformed-request" };
  for (const [path, body] of [
    [CREATE_PRODUCT, '{"productCode":5}'],
    [CREATE_PRODUCT, "{bad"],
    [LIST_PRODUCTS, '{"pageSize":"abc"}'],
  ]) {
    const connect = await connectCall(server, path, "application/json", body);
    t.is(connect.status, 400, body);
    const connectError = errorFromJson(connect.error as JsonValue, undefined, new ConnectError("unreadable"));
    const problem = connectError.findDetails(ProblemDetailsSchema)[0];
    t.deepEqual({ code: connectError.code, type: problem?.type }, expected, body);

    const response = await fetch(server.baseUrl + path, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+json", authorization: server.adminAuthorization },
      body: envelope(0, Buffer.from(body)),
    });
    const trailer = Buffer.from(await response.arrayBuffer());
    const webError = findTrailerError(trailerParse(trailer.subarray(5)));
    const webProblem = webError?.findDetails(ProblemDetailsSchema)[0];
    t.deepEqual({ code: webError?.code, type: webProblem?.type }, expected, `gRPC-Web ${body}`);
  }
});
