/**
 * `npm run bench`: the compiled service (what `npm start` runs) in its own process pinned to core 0, driven from
 * this process (autocannon) and gRPC client processes pinned to core 1, against a bare node:http / node:http2
 * server replaying the same bytes in the same run; REST create also against raw INSERTs of the same rows.
 * Licensing (bench/licensing-rows.ts): check-in and renew over 64 live sessions, check-in again paced at half
 * its measured rate for its p99, and activation with a fresh device each, of one entitlement and of 16.
 * Usage metering (bench/usage-rows.ts), on a service of its own: pre-allocation of 1 over 64 sessions against the
 * bare server, and ingest of batches of 500 usage transactions in events/s against raw multi-row INSERTs of the
 * same rows into the service's usage_records.
 * Webhooks (bench/webhook-rows.ts), on a service of their own: change → receiver latency and fan-out deliveries/s,
 * and activation with a subscription receiving its events against the same without one.
 * Embedded (SQLite, in-process coordinator) and MySQL + Redis, both by default. Every loop is bounded by time;
 * traffic stays on loopback; children and the throwaway database are removed at the end.
 *
 * BENCH_MODE=embedded|mysql (default both), BENCH_SECONDS (per measurement, default 4), BENCH_WARMUP_SECONDS (1),
 * BENCH_CONNECTIONS (32), BENCH_STARTUP_RUNS (5), BENCH_LOG_LEVEL (info, the service's default),
 * BENCH_ONLY=usage|licensing|webhooks|startup (only those rows; without it, all of them).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { GetProductRequestSchema } from "../gen/provision/v1/catalog_pb.js";
import { ensureCompiled } from "../test/support/compiled-build.js";
import { PRODUCTS } from "../test/support/rest.js";
import { startBare } from "./bare-process.js";
import { seedCatalog } from "./catalog-fixture.js";
import { driveHttp, type HttpTarget, type LoadFigures } from "./http-load.js";
import { licensingTargets, onEverySession, seedLicensing } from "./licensing-fixture.js";
import { licensingRows } from "./licensing-rows.js";
import {
  canPin,
  figuresOf,
  killChildren,
  LOAD_CORE,
  pinSelf,
  rssMiB,
  SERVER_CORE,
  type Spawned,
  spawnNode,
} from "./processes.js";
import {
  createStorage,
  type Mode,
  measureStartup,
  median,
  removeAllStorage,
  type Storage,
  startProvision,
} from "./provision-server.js";
import { type Reply, recordGrpc, recordHttp } from "./replies.js";
import { type ModeResult, type PathResult, pathResult, printTable } from "./report.js";
import { usageRows } from "./usage-rows.js";
import { webhookRows } from "./webhook-rows.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const STARTUP_RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 5);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? "info";
const MODES: Mode[] = process.env.BENCH_MODE ? [process.env.BENCH_MODE as Mode] : ["embedded", "mysql"];
const ONLY = process.env.BENCH_ONLY;
const PARTS = ["usage", "licensing", "webhooks", "startup"];
if (ONLY && !PARTS.includes(ONLY)) throw new Error(`BENCH_ONLY=${ONLY}: one of ${PARTS.join(", ")}`);
const GET_PRODUCT = "/provision.v1.CatalogService/GetProduct";
const load = { connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS };
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "provision-bench-run-"));

function httpTargets(authorization: string, productId: string): Record<string, HttpTarget> {
  const auth = { authorization };
  let created = 0;
  return {
    healthz: { name: "/healthz", method: "GET", path: "/healthz", headers: {} },
    get: { name: "REST GET product", method: "GET", path: `${PRODUCTS}/${productId}`, headers: auth },
    list: {
      name: "REST list (page of 20, filtered)",
      method: "GET",
      path: `${PRODUCTS}?pageSize=20&filter=${encodeURIComponent('name~"bench list"')}&sortOrder=-createdAt`,
      headers: auth,
    },
    connect: {
      name: "Connect unary GetProduct (JSON, HTTP/1.1)",
      method: "POST",
      path: GET_PRODUCT,
      headers: { ...auth, "content-type": "application/json", "connect-protocol-version": "1" },
      body: JSON.stringify({ productId }),
    },
    create: {
      name: "REST create product",
      method: "POST",
      path: PRODUCTS,
      headers: { ...auth, "content-type": "application/json" },
      body: () => {
        created++;
        return JSON.stringify({ productCode: `CREATE-${process.pid}-${created}`, productVersion: "1", name: "Bench" });
      },
    },
  };
}

const HEALTHZ_REPLY: Reply = {
  status: 200,
  headers: { "content-type": "application/json" },
  body: Buffer.from('{"status":"ok"}').toString("base64"),
};

/** The service's first start and restart (median of STARTUP_RUNS), beside a bare server's. */
async function startupFigures(mode: Mode) {
  console.error(`[${mode}] start-up, ${STARTUP_RUNS} runs`);
  const startup = await measureStartup(mode, STARTUP_RUNS);
  return { ...startup, ...(await bareStartup(HEALTHZ_REPLY)) };
}

async function bareStartup(healthz: Reply) {
  const times: number[] = [];
  const rss: number[] = [];
  for (let run = 0; run < STARTUP_RUNS; run++) {
    const { bare, readyMs } = await startBare(scratch, { "GET /healthz": healthz });
    times.push(Math.round(readyMs));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    rss.push(rssMiB(bare.child.pid ?? 0));
    await bare.stop();
  }
  return { bareMedianMs: median(times), bareIdleRssMiB: median(rss) };
}

/** Runs the gRPC client process (pinned to the load core) against `address`. */
async function driveGrpc(address: string, message: Uint8Array, authorization: string, streams: number) {
  const options = {
    address,
    path: GET_PRODUCT,
    message: Buffer.from(message).toString("base64"),
    authorization,
    streams,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
  };
  return figuresOf(
    spawnNode(["--import", "tsx", "bench/grpc-load.ts", JSON.stringify(options)], { core: LOAD_CORE, stdout: "pipe" }),
  );
}

async function rawInsert(storage: Storage, templateId: string): Promise<LoadFigures> {
  const options = {
    databaseUrl: storage.databaseUrl,
    templateId,
    concurrency: CONNECTIONS,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
  };
  return figuresOf(
    spawnNode(["--import", "tsx", "bench/raw-insert.ts", JSON.stringify(options)], {
      core: SERVER_CORE,
      stdout: "pipe",
    }),
  );
}

function modeName(mode: Mode): string {
  return mode === "embedded" ? "embedded (SQLite, in-process)" : "MySQL + Redis";
}

async function benchMode(mode: Mode): Promise<ModeResult> {
  if (ONLY === "usage") return { mode: modeName(mode), paths: await usageRows(mode, load, LOG_LEVEL, scratch) };
  if (ONLY === "webhooks") return { mode: modeName(mode), paths: await webhookRows(mode, load, LOG_LEVEL) };
  if (ONLY === "startup") return { mode: modeName(mode), startup: await startupFigures(mode), paths: [] };
  const storage = await createStorage(mode);
  const servers: Spawned[] = [];
  try {
    const provision = await startProvision(storage, LOG_LEVEL);
    servers.push(provision);
    const fixture = await seedCatalog(provision.baseUrl, provision.admin);
    const targets = httpTargets(fixture.authorization, fixture.productId);
    const message = toBinary(
      GetProductRequestSchema,
      create(GetProductRequestSchema, { productId: fixture.productId }),
    );

    const http1: Record<string, Reply> = {};
    for (const target of Object.values(targets)) {
      http1[`${target.method} ${target.path}`] = await recordHttp(provision.baseUrl, target);
    }
    const createdId = JSON.parse(Buffer.from(http1[`POST ${PRODUCTS}`].body, "base64").toString("utf8")).id;
    const h2c = { [GET_PRODUCT]: await recordGrpc(provision.baseUrl, GET_PRODUCT, message, fixture.authorization) };
    const licensed = licensingTargets(await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId));
    const { activate, renew, checkIn } = licensed;
    http1[`${activate.method} ${activate.path}`] = await recordHttp(provision.baseUrl, activate);
    Object.assign(http1, onEverySession(renew, await recordHttp(provision.baseUrl, renew)));
    Object.assign(http1, onEverySession(checkIn, await recordHttp(provision.baseUrl, checkIn)));
    const { bare, http1Url, h2cAddress } = await startBare(scratch, http1, h2c);
    servers.push(bare);

    const paths: PathResult[] = [];
    if (ONLY === "licensing") {
      paths.push(...(await licensingRows(mode, { provision: provision.baseUrl, bare: http1Url }, licensed, load)));
      return { mode: modeName(mode), paths };
    }
    const compare = async (key: keyof typeof targets, goal?: string) => {
      console.error(`[${mode}] ${targets[key].name}`);
      const measured = await driveHttp(provision.baseUrl, targets[key], load);
      paths.push(pathResult(targets[key].name, measured, await driveHttp(http1Url, targets[key], load), "bare", goal));
    };
    const getGoal = mode === "embedded" ? "≥ 0.2× bare" : "≥ 0.1× bare";
    await compare("get", getGoal);
    await compare("list");
    await compare("connect", getGoal);
    await compare("healthz");

    for (const streams of [1, CONNECTIONS]) {
      const name = streams === 1 ? "gRPC h2c, 1 connection, sequential" : `gRPC h2c, ${streams} streams`;
      console.error(`[${mode}] ${name}`);
      const measured = await driveGrpc(`127.0.0.1:${provision.port}`, message, fixture.authorization, streams);
      const baseline = await driveGrpc(h2cAddress, message, fixture.authorization, streams);
      paths.push(pathResult(name, measured, baseline, "bare", streams === 1 ? "p50 ≤ 1 ms" : undefined));
    }

    // Before the bulk inserts of create: their after-effects (InnoDB flushing, a long SQLite WAL) would slow
    // what follows them.
    paths.push(...(await licensingRows(mode, { provision: provision.baseUrl, bare: http1Url }, licensed, load)));

    console.error(`[${mode}] ${targets.create.name}`);
    const created = await driveHttp(provision.baseUrl, targets.create, load);
    paths.push(pathResult(targets.create.name, created, await driveHttp(http1Url, targets.create, load)));
    const raw = await rawInsert(storage, createdId);
    paths.push(pathResult(`${targets.create.name} vs raw INSERT`, created, raw, "raw insert", "≥ 0.3× raw"));
    paths.push(...(await usageRows(mode, load, LOG_LEVEL, scratch)));
    paths.push(...(await webhookRows(mode, load, LOG_LEVEL)));

    return { mode: modeName(mode), startup: await startupFigures(mode), paths };
  } finally {
    for (const server of servers) await server.stop();
    await storage.remove();
  }
}

async function main() {
  ensureCompiled();
  pinSelf();
  if (!canPin) console.error("taskset or a second core is missing: the server and the load share cores");
  const results: ModeResult[] = [];
  for (const mode of MODES) results.push(await benchMode(mode));
  for (const result of results) printTable(result);
  console.log(
    JSON.stringify(
      {
        node: process.version,
        cores: os.cpus().length,
        pinned: canPin,
        secondsPerMeasurement: SECONDS,
        connections: CONNECTIONS,
        logLevel: LOG_LEVEL,
        results,
      },
      null,
      2,
    ),
  );
}

process.once("SIGINT", () => {
  killChildren();
  void removeAllStorage().finally(() => process.exit(130));
});
try {
  await main();
} finally {
  killChildren();
  fs.rmSync(scratch, { recursive: true, force: true });
}
