/**
 * Check-in against the bare server in alternating windows, to compare two versions of the service on this
 * noisy machine: `node --import tsx bench/interleaved-check-in.ts [embedded|mysql] [rounds] [seconds]` starts
 * the compiled service and the bare server replaying its check-in answer, then drives each in turn for
 * `seconds` (default 1), `rounds` times (default 10), and prints every round's ratio and their median as JSON.
 * Both run while the machine is in the same state, so their ratio moves far less than either figure does.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureCompiled } from "../test/support/compiled-build.js";
import { startBare } from "./bare-process.js";
import { seedCatalog } from "./catalog-fixture.js";
import { driveHttp } from "./http-load.js";
import { licensingTargets, onEverySession, seedLicensing } from "./licensing-fixture.js";
import { killChildren, pinSelf } from "./processes.js";
import { createStorage, type Mode, median, startProvision } from "./provision-server.js";
import { recordHttp } from "./replies.js";

const [mode = "embedded", rounds = "10", seconds = "1"] = process.argv.slice(2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

async function main() {
  ensureCompiled();
  pinSelf();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "provision-interleaved-"));
  const storage = await createStorage(mode as Mode);
  try {
    const provision = await startProvision(storage, process.env.BENCH_LOG_LEVEL ?? "info");
    const fixture = await seedCatalog(provision.baseUrl, provision.admin);
    const { checkIn } = licensingTargets(
      await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId),
    );
    const healthz = { name: "/healthz", method: "GET" as const, path: "/healthz", headers: {} };
    const { bare, http1Url } = await startBare(scratch, {
      "GET /healthz": await recordHttp(provision.baseUrl, healthz),
      ...onEverySession(checkIn, await recordHttp(provision.baseUrl, checkIn)),
    });
    const load = { connections: CONNECTIONS, seconds: Number(seconds), warmupSeconds: 0 };
    await driveHttp(provision.baseUrl, checkIn, load);
    await driveHttp(http1Url, checkIn, load);
    const ratios: number[] = [];
    for (let round = 0; round < Number(rounds); round++) {
      const service = await driveHttp(provision.baseUrl, checkIn, load);
      const baseline = await driveHttp(http1Url, checkIn, load);
      if (service.failures > 0) throw new Error(`${service.failures} check-ins failed`);
      ratios.push(Number((service.requestsPerSecond / baseline.requestsPerSecond).toFixed(3)));
    }
    console.log(
      JSON.stringify({ mode, connections: CONNECTIONS, ratios, median: median(ratios.map((r) => r * 1000)) / 1000 }),
    );
    await bare.stop();
    await provision.stop();
  } finally {
    await storage.remove();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

try {
  await main();
} finally {
  killChildren();
}
