/**
 * Where a usage metering path's server time goes:
 *   node --import tsx bench/profile-usage.ts <ingest|preallocate> [mysql|embedded] [seconds]
 * starts the service under --cpu-prof (pinned to its core, as `npm run bench` does), seeds the usage fixture,
 * drives the path with the benchmark's load for `seconds` (default 8), stops the service and prints the figures,
 * the CPU seconds the service used while the load ran (its share of one core) and the functions and files with the
 * most samples, as JSON. The profile is left in a temporary folder it names.
 */
import { ensureCompiled } from "../test/support/compiled-build.js";
import type { LicensedSession } from "../test/support/observability.js";
import { profileFolder, stopAndSummarize } from "./cpu-profile.js";
import { driveHttp, type LoadOptions } from "./http-load.js";
import { driveIngest } from "./ingest-load.js";
import { cpuSecondsOf, pinSelf } from "./processes.js";
import { type Mode, onFreshStorage, profiledMain, type Storage, startProvision } from "./provision-server.js";
import { preallocateTarget, seedUsage } from "./usage-fixture.js";

const [pathName = "ingest", mode = "mysql", seconds = "8"] = process.argv.slice(2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

/** Drives the path with a load; answers its figures and what its answers said. */
function driverOf(name: string, baseUrl: string, sessions: LicensedSession[]) {
  if (name === "ingest") return (load: LoadOptions) => driveIngest(baseUrl, sessions, load);
  if (name !== "preallocate") throw new Error(`unknown path ${name}: ingest or preallocate`);
  const { target, tally } = preallocateTarget(sessions);
  return async (load: LoadOptions) => ({ figures: await driveHttp(baseUrl, target, load), tally });
}

async function measure(storage: Storage) {
  const folder = profileFolder();
  const provision = await startProvision(storage, "info", undefined, profiledMain(folder));
  const sessions = await seedUsage(provision.baseUrl, provision.admin);
  const load = { connections: CONNECTIONS, seconds: Number(seconds), warmupSeconds: 0 };
  const drive = driverOf(pathName, provision.baseUrl, sessions);
  await drive({ ...load, seconds: 1 });
  const pid = provision.child.pid ?? 0;
  const cpuBefore = cpuSecondsOf(pid);
  const { figures, tally } = await drive(load);
  const serviceCpuShare = Number(((cpuSecondsOf(pid) - cpuBefore) / Number(seconds)).toFixed(2));
  const summary = await stopAndSummarize(folder, provision, { seconds: Number(seconds) });
  console.log(JSON.stringify({ path: pathName, mode, figures, tally, serviceCpuShare, ...summary }, null, 2));
}

ensureCompiled();
pinSelf();
await onFreshStorage(mode as Mode, measure);
