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
// frames) waits for the client's delayed ACK, at least 40 ms on Linux, so every call takes 40 ms or more.
// Without it a call takes well under a millisecond. A loaded machine makes calls slower, never faster, so the
// fastest of 20 calls tells the two apart without depending on how busy the machine is.
const CALLS = 20;
const FASTEST_BOUND_MS = 30;
const LIST_PRODUCTS = "/provision.v1.CatalogService/ListProducts";

/**
 * Times calls without a token, one after another: refused before any database work, they measure the
 * protocol round trip alone. Each must be refused as unauthenticated. Answers the fastest call's time.
 */
async function fastestSequential(
  call: () => Promise<unknown>,
  isRefusal: (error: unknown) => boolean,
): Promise<number> {
  const refused = () =>
    call().then(
      () => Promise.reject(new Error("a call without a token succeeded")),
      (error: unknown) => (isRefusal(error) ? undefined : Promise.reject(error)),
    );
  await refused(); // the connection is set up outside the measurement
  let fastest = Number.POSITIVE_INFINITY;
  for (let index = 0; index < CALLS; index++) {
    const started = performance.now();
    await refused();
    fastest = Math.min(fastest, performance.now() - started);
  }
  return fastest;
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
  const fastest = await fastestSequential(() => grpcListProducts(client), grpcUnauthenticated);
  t.true(fastest < FASTEST_BOUND_MS, `the fastest of ${CALLS} calls took ${fastest.toFixed(1)} ms`);
});

// Node's HTTP/2 turns Nagle off on a socket it is given (a TLS socket has setNoDelay); this keeps it that way.
test("sequential grpc-js calls on one TLS HTTP/2 connection do not wait for delayed ACKs", async (t) => {
  const { tlsServer, cert } = t.context;
  const client = new grpc.Client(`localhost:${tlsServer.port}`, grpc.credentials.createSsl(cert.cert));
  t.teardown(() => client.close());
  const fastest = await fastestSequential(() => grpcListProducts(client), grpcUnauthenticated);
  t.true(fastest < FASTEST_BOUND_MS, `the fastest of ${CALLS} calls took ${fastest.toFixed(1)} ms`);
});
