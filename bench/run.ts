/**
 * `npm run bench`: throughput, latency and memory of the catalog over REST and gRPC against the real server
 * on a throwaway MySQL database and the local Redis (TEST_DATABASE_URL / TEST_REDIS_URL), or on SQLite with
 * `BENCH_EMBEDDED=1`. Every loop is bounded; traffic stays on loopback.
 */
import os from "node:os";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { CatalogService } from "../gen/provision/v1/catalog_pb.js";
import { sendAuthorization } from "../test/support/credentials.js";
import { PRODUCTS } from "../test/support/rest.js";
import { startTestServer } from "../test/support/test-server.js";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1000);

interface Result {
  name: string;
  requests: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

async function measure(name: string, requests: number, call: (index: number) => Promise<void>): Promise<Result> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests) {
        const index = next++;
        const begin = performance.now();
        await call(index);
        latencies.push(performance.now() - begin);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const percentile = (p: number) =>
    Number(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(2));
  return {
    name,
    requests,
    seconds: Number(seconds.toFixed(2)),
    perSecond: Math.round(requests / seconds),
    p50Ms: percentile(0.5),
    p99Ms: percentile(0.99),
  };
}

async function expectOk(response: Response): Promise<void> {
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
}

const embedded = process.env.BENCH_EMBEDDED === "1";
const server = await startTestServer({
  embedded: embedded ? { file: path.join(os.tmpdir(), `provision-bench-${process.pid}.sqlite`) } : undefined,
  env: { LOG_LEVEL: "warn" },
});
try {
  const rssBefore = process.memoryUsage().rss;
  const results: Result[] = [];
  results.push(
    await measure("REST create product", REQUESTS, async (index) => {
      await expectOk(
        await fetch(server.baseUrl + PRODUCTS, {
          method: "POST",
          headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
          body: JSON.stringify({ productCode: `BENCH-${index}`, productVersion: "1", name: `Bench ${index}` }),
        }),
      );
    }),
  );
  results.push(
    await measure("REST list products (page of 20, filtered)", REQUESTS, async () => {
      await expectOk(
        await fetch(
          `${server.baseUrl}${PRODUCTS}?pageSize=20&filter=${encodeURIComponent("name~bench")}&sortOrder=-createdAt`,
          { headers: { authorization: server.adminAuthorization } },
        ),
      );
    }),
  );
  const grpc = createClient(
    CatalogService,
    createGrpcTransport({ baseUrl: server.baseUrl, interceptors: [sendAuthorization(server.adminAuthorization)] }),
  );
  results.push(
    await measure("gRPC list products (page of 20)", REQUESTS, async () => {
      await grpc.listProducts({ pageSize: 20 });
    }),
  );
  const rssAfter = process.memoryUsage().rss;
  console.log(
    JSON.stringify(
      {
        database: embedded ? "sqlite" : "mysql",
        concurrency: CONCURRENCY,
        results,
        memory: { rssBeforeMiB: Math.round(rssBefore / 2 ** 20), rssAfterMiB: Math.round(rssAfter / 2 ** 20) },
      },
      null,
      2,
    ),
  );
} finally {
  await server.close();
}
