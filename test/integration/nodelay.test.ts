import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { createSelfSignedCert, type SelfSignedCert } from "../support/tls-cert.js";

const test = anyTest as TestFn<{ server: TestServer; tlsServer: TestServer; cert: SelfSignedCert }>;

test.before(async (t) => {
  t.context.cert = await createSelfSignedCert();
  const { certFile, keyFile } = t.context.cert;
  [t.context.server, t.context.tlsServer] = await Promise.all([
    startTestServer(),
    startTestServer({ tls: { certFile, keyFile } }),
  ]);
});

test.after.always(async (t) => {
  await t.context.server?.close();
  await t.context.tlsServer?.close();
  t.context.cert?.remove();
});

// With Nagle's algorithm on, a response's second small write (HTTP/2 sends headers and trailers as separate
// frames) waits for the client's delayed ACK, about 40 ms on Linux: 20 sequential calls take over 800 ms.
// Without it they take a few milliseconds each; 400 ms leaves a wide margin for a slow machine.
const CALLS = 20;
const BOUND_MS = 400;
const LIST_PRODUCTS = "/provision.v1.CatalogService/ListProducts";

/**
 * Times calls without a token: refused before any database work, they measure the protocol round trip alone.
 * Each must be refused as unauthenticated.
 */
async function timeSequential(call: () => Promise<unknown>, isRefusal: (error: unknown) => boolean): Promise<number> {
  const refused = () =>
    call().then(
      () => Promise.reject(new Error("a call without a token succeeded")),
      (error: unknown) => (isRefusal(error) ? undefined : Promise.reject(error)),
    );
  await refused(); // the connection is set up outside the measurement
  const started = performance.now();
  for (let index = 0; index < CALLS; index++) await refused();
  return performance.now() - started;
}

/** An empty ListProducts request from a stock grpc-js client, on the client's one connection. */
function grpcListProducts(client: grpc.Client): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const identity = (bytes: Buffer) => bytes;
    client.makeUnaryRequest(LIST_PRODUCTS, identity, identity, Buffer.alloc(0), (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

const grpcUnauthenticated = (error: unknown) => (error as grpc.ServiceError).code === grpc.status.UNAUTHENTICATED;

test("sequential grpc-js calls on one cleartext HTTP/2 connection do not wait for delayed ACKs", async (t) => {
  const client = new grpc.Client(`127.0.0.1:${t.context.server.port}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const elapsed = await timeSequential(() => grpcListProducts(client), grpcUnauthenticated);
  t.true(elapsed < BOUND_MS, `${CALLS} calls took ${elapsed.toFixed(0)} ms`);
});

// Node's HTTP/2 turns Nagle off on a socket it is given (a TLS socket has setNoDelay); this keeps it that way.
test("sequential grpc-js calls on one TLS HTTP/2 connection do not wait for delayed ACKs", async (t) => {
  const { tlsServer, cert } = t.context;
  const client = new grpc.Client(`localhost:${tlsServer.port}`, grpc.credentials.createSsl(cert.cert));
  t.teardown(() => client.close());
  const elapsed = await timeSequential(() => grpcListProducts(client), grpcUnauthenticated);
  t.true(elapsed < BOUND_MS, `${CALLS} calls took ${elapsed.toFixed(0)} ms`);
});
