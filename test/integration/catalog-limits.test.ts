import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { create } from "@bufbuild/protobuf";
import { DurationSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import {
  AddMonitoredResourceRequestSchema,
  CatalogService,
  ImportProductsRequestSchema,
  MonitoredAssetSchema,
  ProductSchema,
  UpdateMonitoredResourceRequestSchema,
  UpdateProductRequestSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { authorizationMetadata } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

type Mode = "MySQL" | "SQLite";
const MODES: Mode[] = ["MySQL", "SQLite"];

const test = anyTest as TestFn<{ servers: Record<Mode, TestServer> }>;

test.before(async (t) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "provision-limits-")), "provision.sqlite");
  const [mysqlServer, sqliteServer] = await Promise.all([startTestServer(), startTestServer({ embedded: { file } })]);
  t.context.servers = { MySQL: mysqlServer, SQLite: sqliteServer };
});

test.after.always(async (t) => {
  await Promise.all(Object.values(t.context.servers ?? {}).map((server) => server.close()));
});

async function createProduct(baseUrl: string, productCode: string): Promise<string> {
  const response = await rest(baseUrl, "POST", PRODUCTS, { productCode });
  if (response.status !== 200) throw new Error(`create answered ${response.status}`);
  return response.body.id;
}

/**
 * Runs `work` while polling `/healthz` on another connection, the first probe sent after the work's request;
 * counts the health answers that arrived before `work` finished (an event loop held by it lets none through).
 */
async function pollingHealth<T>(
  baseUrl: string,
  work: () => Promise<T>,
): Promise<{ result: T; answeredMeanwhile: number }> {
  let done = false;
  let answeredMeanwhile = 0;
  const running = work().finally(() => {
    done = true;
  });
  const poll = (async () => {
    while (!done) {
      const response = await fetch(`${baseUrl}/healthz`);
      await response.arrayBuffer();
      if (response.ok && !done) answeredMeanwhile++;
    }
  })();
  const result = await running;
  await poll;
  return { result, answeredMeanwhile };
}

function features(count: number, prefix = "f") {
  return Array.from({ length: count }, (_, index) => ({ featureCode: `${prefix}${index}` }));
}

for (const mode of MODES) {
  // Serial: the test server shares this process, and other tests' work would hold its event loop too.
  test.serial(
    `${mode}: a PUT of 100k features is refused naming features and the cap while /healthz keeps answering`,
    async (t) => {
      const { baseUrl } = t.context.servers[mode];
      const id = await createProduct(baseUrl, `HUGE-${mode}`);
      const body = { features: Array.from({ length: 100_000 }, () => ({})) };
      const { result, answeredMeanwhile } = await pollingHealth(baseUrl, () =>
        rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, body),
      );
      t.is(result.status, 400);
      t.true(result.body.errors.some((error: { field: string }) => error.field === "features"));
      t.regex(result.body.detail, /features/);
      t.regex(result.body.detail, /1000/);
      t.true(answeredMeanwhile > 0);
      const stored = await rest(baseUrl, "GET", `${PRODUCTS}/${id}`);
      t.is(stored.body.features.length, 0);
      t.is(stored.body.revisionNumber, 1);
    },
  );

  test(`${mode}: a product holds at most 1000 features in total, counted against what is stored`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const id = await createProduct(baseUrl, `TOTAL-${mode}`);
    t.is((await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features: features(600, "a") })).status, 200);
    const over = await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features: features(401, "b") });
    t.is(over.status, 400);
    t.deepEqual(
      over.body.errors.map((error: { field: string }) => error.field),
      ["features"],
    );
    t.regex(over.body.detail, /at most 1000 features/);
    const fits = await rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features: features(400, "b") });
    t.is(fits.status, 200);
    t.is(fits.body.features.length, 1000);
    const oneMore = await rest(baseUrl, "POST", `${PRODUCTS}/${id}/features`, { featureCode: "c" });
    t.is(oneMore.status, 400);
    t.is((await rest(baseUrl, "GET", `${PRODUCTS}/${id}`)).body.features.length, 1000);
  });

  test(`${mode}: an import over 10,000 nested items is refused naming products, writing nothing`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const products = Array.from({ length: 1000 }, (_, index) => ({
      productCode: `NEST-${mode}-${index}`,
      features: features(index < 1 ? 11 : 10),
    }));
    const response = await rest(baseUrl, "POST", `${PRODUCTS}/import`, products);
    t.is(response.status, 400);
    t.regex(response.body.detail, /10001 nested items/);
    t.regex(response.body.detail, /at most 10000/);
    const listed = await rest(baseUrl, "GET", `${PRODUCTS}?filter=${encodeURIComponent(`NEST-${mode}`)}`);
    t.is(listed.body.totalCount, 0);
  });

  test(`${mode}: a product holds at most 100 monitored assets`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const assets = Array.from({ length: 101 }, (_, index) => ({ metricName: `m${index}` }));
    const response = await rest(baseUrl, "POST", `${PRODUCTS}/import`, [
      { productCode: `ASSETS-${mode}`, monitoredAssets: assets },
    ]);
    t.is(response.status, 400);
    t.is(response.body.errors[0].field, "products[0].monitoredAssets");
    t.regex(response.body.detail, /100/);
  });
}

test.serial("SQLite: the largest legal import leaves /healthz answering while it runs, and lands whole", async (t) => {
  const { baseUrl } = t.context.servers.SQLite;
  const products = Array.from({ length: 1000 }, (_, index) => ({
    productCode: `BIG-${index}`,
    features: features(10),
  }));
  // The server runs in this process: a timer here sees every stretch the event loop was held. Unchunked, an
  // import of this size held it for seconds (2.3 s measured); the goal is ~100 ms, and the bound is generous.
  const held = longestEventLoopHold();
  const { result, answeredMeanwhile } = await pollingHealth(baseUrl, () =>
    rest(baseUrl, "POST", `${PRODUCTS}/import`, products),
  );
  t.true(held.stop() < 1000, `the event loop was held for ${held.stop()} ms at once`);
  t.is(result.status, 200);
  t.is(result.body.createdCount, 1000);
  t.is(result.body.products[999].features.length, 10);
  t.true(answeredMeanwhile > 0);
  const listed = await rest(baseUrl, "GET", `${PRODUCTS}?pageSize=100&filter=BIG-`);
  t.is(listed.body.totalCount, 1000);
  t.true(listed.body.items.every((item: { features: unknown[] }) => item.features.length === 10));
});

test("gRPC: an invalid Duration or Timestamp answers INVALID_ARGUMENT naming the field, not INTERNAL", async (t) => {
  const server = t.context.servers.MySQL;
  const id = await createProduct(server.baseUrl, "DURATIONS");
  const client = grpcClient(CatalogService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const metadata = authorizationMetadata(server.adminAuthorization);

  const wrongSign = create(MonitoredAssetSchema, {
    metricName: "m",
    allowedBackDatingTolerance: create(DurationSchema, { seconds: 5n, nanos: -1 }),
  });
  const added = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "addMonitoredResource",
      create(AddMonitoredResourceRequestSchema, { productId: id, monitoredAsset: wrongSign }),
      metadata,
    ),
  );
  t.is(added?.code, grpc.status.INVALID_ARGUMENT);
  t.regex(added?.details ?? "", /allowedBackDatingTolerance/);

  const tooLong = create(MonitoredAssetSchema, {
    metricName: "m",
    allowedBackDatingTolerance: create(DurationSchema, { seconds: 400_000_000_000n }),
  });
  const imported = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "importProducts",
      create(ImportProductsRequestSchema, {
        products: [create(ProductSchema, { productCode: "D-IMPORT", monitoredAssets: [tooLong] })],
      }),
      metadata,
    ),
  );
  t.is(imported?.code, grpc.status.INVALID_ARGUMENT);
  t.regex(imported?.details ?? "", /products\[0\]\.monitoredAssets\[0\]\.allowedBackDatingTolerance/);

  await client.call(
    "addMonitoredResource",
    create(AddMonitoredResourceRequestSchema, {
      productId: id,
      monitoredAsset: create(MonitoredAssetSchema, { metricName: "ok" }),
    }),
    metadata,
  );
  const farFuture = create(MonitoredAssetSchema, {
    metricName: "ok",
    metricType: 1,
    meteredUsage: { suspendUntilTimeStamp: create(TimestampSchema, { seconds: 300_000_000_000n }) },
  });
  const updated = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "updateMonitoredResource",
      create(UpdateMonitoredResourceRequestSchema, { productId: id, monitoredAsset: farFuture }),
      metadata,
    ),
  );
  t.is(updated?.code, grpc.status.INVALID_ARGUMENT);
  t.regex(updated?.details ?? "", /meteredUsage\.suspendUntilTimeStamp/);

  const badNanos = create(MonitoredAssetSchema, {
    metricName: "n",
    metricType: 2,
    balanceUsage: { lastDeposit: create(TimestampSchema, { seconds: 1n, nanos: -5 }) },
  });
  const balance = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "addMonitoredResource",
      create(AddMonitoredResourceRequestSchema, { productId: id, monitoredAsset: badNanos }),
      metadata,
    ),
  );
  t.is(balance?.code, grpc.status.INVALID_ARGUMENT);
  t.regex(balance?.details ?? "", /balanceUsage\.lastDeposit/);

  // nanos outside 0–999,999,999 would carry a date past 9999 (which MySQL refuses) or before 1000.
  for (const expirationDate of [
    create(TimestampSchema, { seconds: 253_402_300_799n, nanos: 2_147_483_647 }),
    create(TimestampSchema, { seconds: 1_893_456_000n, nanos: -1 }),
  ]) {
    const expiring = await t.throwsAsync<grpc.ServiceError>(
      client.call("updateProduct", create(UpdateProductRequestSchema, { productId: id, expirationDate }), metadata),
    );
    t.is(expiring?.code, grpc.status.INVALID_ARGUMENT, String(expirationDate.nanos));
    t.regex(expiring?.details ?? "", /expirationDate/);
  }
});

test("gRPC: a request over a field's cap answers INVALID_ARGUMENT naming the field and the cap", async (t) => {
  const server = t.context.servers.MySQL;
  const client = grpcClient(CatalogService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const products = Array.from({ length: 1001 }, (_, index) => create(ProductSchema, { productCode: `G${index}` }));
  const error = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "importProducts",
      create(ImportProductsRequestSchema, { products }),
      authorizationMetadata(server.adminAuthorization),
    ),
  );
  t.is(error?.code, grpc.status.INVALID_ARGUMENT);
  t.regex(decodeURIComponent(error?.details ?? ""), /products holds 1001 items; at most 1000 are allowed/);
});

/** Measures the longest stretch between turns of this process's event loop until `stop()`. */
function longestEventLoopHold(): { stop(): number } {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return Math.round(longest);
    },
  };
}

test("REST refuses a list over its cap before decoding it: the cap is named, not the elements' type errors", async (t) => {
  const { baseUrl } = t.context.servers.MySQL;
  const created = await rest(baseUrl, "POST", PRODUCTS, { productCode: "CAP-BEFORE-DECODE" });
  const features = Array.from({ length: 1001 }, () => ({ isEnabled: "not a boolean" }));
  const response = await rest(baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, { features });
  t.is(response.status, 400);
  t.deepEqual(
    response.body.errors.map((violation: { field: string }) => violation.field),
    ["features"],
  );
  t.regex(response.body.detail, /1000/);
});

test("Connect and gRPC refuse 520,000 empty messages from the encoded bytes, before decoding or authentication", async (t) => {
  const { baseUrl, port } = t.context.servers.MySQL;
  // 1,040,000 bytes: each `0a 00` is one empty Product of `products`, none of it decoded.
  const body = new Uint8Array(1_040_000);
  for (let at = 0; at < body.length; at += 2) body[at] = 0x0a;
  const connect = await fetch(`${baseUrl}/provision.v1.CatalogService/ImportProducts`, {
    method: "POST",
    headers: { "content-type": "application/proto" },
    body,
  });
  t.is(connect.status, 400, "no credentials: refused for its size, not 401 after decoding it");
  const answer = (await connect.json()) as { code: string; message: string };
  t.is(answer.code, "invalid_argument");
  t.regex(answer.message, /products holds 520000 items; at most 1000 are allowed/);
  const gzipped = await fetch(`${baseUrl}/provision.v1.CatalogService/ImportProducts`, {
    method: "POST",
    headers: { "content-type": "application/proto", "content-encoding": "gzip" },
    body: gzipSync(body),
  });
  t.is(gzipped.status, 400, "gzipped (about 1 KB sent): inflated within the body limit and refused the same way");
  t.regex(((await gzipped.json()) as { message: string }).message, /products holds 520000 items/);

  const json = await fetch(`${baseUrl}/provision.v1.CatalogService/ImportProducts`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ products: Array.from({ length: 101 }, () => ({ features: Array(1000).fill({}) })) }),
  });
  t.is(json.status, 400);
  t.regex(((await json.json()) as { message: string }).message, /more than 100000 messages/);

  const session = http2.connect(baseUrl);
  t.teardown(() => session.close());
  session.on("error", () => undefined);
  const envelope = Buffer.alloc(5 + body.length + 1);
  envelope.writeUInt32BE(body.length, 1);
  envelope.set(body, 5); // and one byte more: not one message, which connect-node would decode before refusing
  const stream = session.request({
    ":method": "POST",
    ":path": "/provision.v1.CatalogService/ImportProducts",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.end(envelope);
  stream.resume();
  const [trailers] = (await once(stream, "trailers")) as [http2.IncomingHttpHeaders];
  t.is(trailers["grpc-status"], String(grpc.status.INVALID_ARGUMENT));
  t.regex(decodeURIComponent(String(trailers["grpc-message"])), /products holds 520000 items/);

  const client = grpcClient(CatalogService, `127.0.0.1:${port}`);
  t.teardown(() => client.close());
  const nested = Array.from({ length: 101 }, () => create(ProductSchema, { features: Array(1000).fill({}) }));
  const error = await t.throwsAsync<grpc.ServiceError>(
    client.call("importProducts", create(ImportProductsRequestSchema, { products: nested }), new grpc.Metadata()),
  );
  t.is(error?.code, grpc.status.INVALID_ARGUMENT, "every cap met, but over the bound on messages");
  t.regex(decodeURIComponent(error?.details ?? ""), /more than 100000 messages/);
});

test("REST refuses a body holding more messages than the bound, though each list is within its cap", async (t) => {
  const { baseUrl } = t.context.servers.MySQL;
  const products = Array.from({ length: 101 }, (_, index) => ({
    productCode: `B${index}`,
    features: Array(1000).fill({}),
  }));
  const response = await rest(baseUrl, "POST", `${PRODUCTS}/import`, products);
  t.is(response.status, 400, JSON.stringify(response.body).slice(0, 300));
  t.regex(response.body.detail, /more than 100000 messages/);
});

test("Connect JSON that is not UTF-8 is refused as malformed, as REST refuses it, rather than stored as U+FFFD", async (t) => {
  const { baseUrl } = t.context.servers.MySQL;
  const body = Buffer.concat([
    Buffer.from('{"productCode":"UTF8-'),
    Buffer.from([0xff, 0xfe, 0xc3, 0x28]),
    Buffer.from('"}'),
  ]);
  const answer = await fetch(`${baseUrl}/provision.v1.CatalogService/CreateProduct`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: t.context.servers.MySQL.adminAuthorization },
    body,
  });
  t.is(answer.status, 400);
  t.like(await answer.json(), { code: "invalid_argument", message: "the JSON body is not UTF-8" });
  const listed = await rest(baseUrl, "GET", `${PRODUCTS}?filter=UTF8-`);
  t.is(listed.body.totalCount, 0, "nothing stored");
});

/** 520,000 empty products and then a truncated record: a decoder builds them all before it fails. */
function productsThenFault(): Buffer {
  const body = Buffer.alloc(1_040_000 + 2);
  for (let at = 0; at < 1_040_000; at += 2) body[at] = 0x0a;
  body.set([0x0a, 0x05], 1_040_000);
  return body;
}

function envelope(data: Uint8Array, flags = 0): Buffer {
  const framed = Buffer.alloc(5 + data.length);
  framed[0] = flags;
  framed.writeUInt32BE(data.length, 1);
  framed.set(data, 5);
  return framed;
}

test("calls connect-node answers (gRPC-Web, gRPC over HTTP/1.1, a second message) are checked before it decodes them", async (t) => {
  const { baseUrl, adminAuthorization } = t.context.servers.MySQL;
  const url = `${baseUrl}/provision.v1.CatalogService/ImportProducts`;
  const refusedForProducts = /products holds 520000 items; at most 1000 are allowed/;
  /** Headers, body and trailers of the answer, as one text. */
  const answerText = (headers: Record<string, string>, body: Buffer) =>
    new Promise<string>((resolve, reject) => {
      const request = http.request(url, { method: "POST", headers: { ...headers, authorization: adminAuthorization } });
      request.on("error", reject);
      request.on("response", (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          const lines = (fields: Record<string, unknown>) =>
            Object.entries(fields)
              .map(([name, value]) => `${name}: ${value}`)
              .join("\n");
          const text = `${lines(response.headers)}\n${Buffer.concat(chunks).toString("latin1")}\n${lines(response.trailers)}`;
          resolve(decodeURIComponent(text));
        });
      });
      request.end(body);
    });
  const variants: [string, Record<string, string>, Buffer][] = [
    ["gRPC-Web", { "content-type": "application/grpc-web+proto" }, envelope(productsThenFault())],
    ["gRPC over HTTP/1.1", { "content-type": "application/grpc", te: "trailers" }, envelope(productsThenFault())],
    [
      "gRPC-Web, the products in a second message",
      { "content-type": "application/grpc-web+proto" },
      Buffer.concat([envelope(new Uint8Array()), envelope(productsThenFault())]),
    ],
  ];
  for (const [what, headers, body] of variants) {
    const text = await answerText(headers, body);
    t.regex(text, /grpc-status: ?3/, what);
    t.regex(
      text,
      refusedForProducts,
      `${what}: refused for its products, not for the fault a decoder meets after them`,
    );
  }
});
