/**
 * Where a licensing path's server time goes:
 *   node --import tsx bench/profile-licensing.ts <activate|activateCustomers|renew|checkIn> [mysql|embedded] [seconds] [rate]
 * starts the service under --cpu-prof (pinned to its core, as `npm run bench` does), seeds the licensing
 * fixture, drives the path with the benchmark's load for `seconds` (default 8; paced at `rate` requests per
 * second when given, as the ½-load row is), stops the service and prints
 * the functions and files with the most samples while the load ran, as JSON. The profile is left in a
 * temporary folder it names.
 */
import { ensureCompiled } from "../test/support/compiled-build.js";
import { seedCatalog } from "./catalog-fixture.js";
import { profileFolder, stopAndSummarize } from "./cpu-profile.js";
import { driveHttp } from "./http-load.js";
import { licensingTargets, seedLicensing } from "./licensing-fixture.js";
import { drivePaced } from "./paced-load.js";
import { pinSelf } from "./processes.js";
import { type Mode, onFreshStorage, profiledMain, type Storage, startProvision } from "./provision-server.js";

const [pathName = "activate", mode = "mysql", seconds = "8", rate] = process.argv.slice(2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

async function measure(storage: Storage) {
  const folder = profileFolder();
  const provision = await startProvision(storage, "info", undefined, profiledMain(folder));
  const fixture = await seedCatalog(provision.baseUrl, provision.admin);
  const targets = licensingTargets(await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId));
  const target = targets[pathName as keyof typeof targets];
  if (!target) throw new Error(`unknown path ${pathName}: activate, activateCustomers, renew or checkIn`);
  const load = { connections: CONNECTIONS, seconds: Number(seconds), warmupSeconds: 1 };
  const figures = rate
    ? await drivePaced(provision.baseUrl, target, { ...load, rate: Number(rate) })
    : await driveHttp(provision.baseUrl, target, load);
  const summary = await stopAndSummarize(folder, provision, { seconds: Number(seconds) });
  console.log(JSON.stringify({ path: target.name, mode, figures, ...summary }, null, 2));
}

ensureCompiled();
pinSelf();
await onFreshStorage(mode as Mode, measure);
