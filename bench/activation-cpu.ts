/**
 * CPU per activation, of the service and of MariaDB, at one paced rate:
 *   node --import tsx bench/activation-cpu.ts <activate|activateCustomers> [rate] [rounds]
 * starts the compiled service on MySQL + Redis (pinned to its core, as `npm run bench` does), seeds the licensing
 * fixture, then sends activations at `rate` per second (default 300) for 2 s, `rounds` times (default 5), and prints
 * the CPU microseconds the service and mariadbd used per activation in each round and their medians, as JSON.
 * Activations pile up sessions as they go, as in `npm run bench`; on a machine whose throughput moves between
 * runs, CPU per activation at a fixed pace moves far less.
 */
import { ensureCompiled } from "../test/support/compiled-build.js";
import { seedCatalog } from "./catalog-fixture.js";
import { licensingTargets, seedLicensing } from "./licensing-fixture.js";
import { drivePaced } from "./paced-load.js";
import { cpuSecondsOf, mariadbPid, pinSelf } from "./processes.js";
import { median, onFreshStorage, type Storage, startProvision } from "./provision-server.js";

const [pathName = "activateCustomers", rate = "300", rounds = "5"] = process.argv.slice(2);
const WINDOW_SECONDS = 2;

async function measure(storage: Storage) {
  const provision = await startProvision(storage, "info");
  const fixture = await seedCatalog(provision.baseUrl, provision.admin);
  const targets = licensingTargets(await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId));
  const target = pathName === "activate" ? targets.activate : targets.activateCustomers;
  const pids = { service: provision.child.pid ?? 0, mariadb: mariadbPid() };
  const pace = { connections: 32, seconds: WINDOW_SECONDS, warmupSeconds: 0, rate: Number(rate) };
  const figures = { service: [] as number[], mariadb: [] as number[] };
  for (let round = 0; round <= Number(rounds); round++) {
    const before = { service: cpuSecondsOf(pids.service), mariadb: cpuSecondsOf(pids.mariadb) };
    const load = await drivePaced(provision.baseUrl, target, pace);
    if (load.failures > 0) throw new Error(`${load.failures} activations failed`);
    if (round === 0) continue;
    for (const side of ["service", "mariadb"] as const) {
      figures[side].push(((cpuSecondsOf(pids[side]) - before[side]) * 1e6) / (pace.rate * pace.seconds));
    }
  }
  const medians = { service: median(figures.service), mariadb: median(figures.mariadb) };
  console.log(JSON.stringify({ path: target.name, rate: pace.rate, figures, medians }, null, 2));
}

ensureCompiled();
pinSelf();
await onFreshStorage("mysql", measure);
