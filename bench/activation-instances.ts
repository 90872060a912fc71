/**
 * Activations of one entitlement spread over several instances against the same load on one:
 *   node --import tsx bench/activation-instances.ts [instances] [rounds] [seconds]
 * starts `instances` (default 3) compiled services on one MySQL + Redis, all pinned to the server core (the same
 * CPU as one instance has), seeds the licensing fixture, then alternates for `rounds` (default 3) between 32
 * connections activating fresh devices through the first instance alone, the same 32 spread evenly over every
 * instance, and (the reference: the instances sharing one core, no row between them) spread so that each instance
 * activates an entitlement of its own, and prints each round's activations per second, as JSON. Instances' groups
 * meet on the entitlement's row: each passes over a row another instance holds and sends its activations to a lane.
 */

import { ensureCompiled } from "../test/support/compiled-build.js";
import { ACTIVATE } from "../test/support/licensing.js";
import { seedCatalog } from "./catalog-fixture.js";
import { driveHttp, type HttpTarget, type LoadOptions } from "./http-load.js";
import { licensingTargets, seedLicensing } from "./licensing-fixture.js";
import { pinSelf } from "./processes.js";
import { onFreshStorage, type Storage, startProvision } from "./provision-server.js";

const [instances = "3", rounds = "3", seconds = "4"] = process.argv.slice(2);
const CONNECTIONS = 32;

async function measure(storage: Storage) {
  const first = await startProvision(storage, "info");
  const others = [];
  for (let index = 1; index < Number(instances); index++)
    others.push(await startProvision(storage, "info", first.admin));
  const fixture = await seedCatalog(first.baseUrl, first.admin);
  const seeded = await seedLicensing(first.baseUrl, fixture.authorization, fixture.productId);
  const { activate } = licensingTargets(seeded);
  const all = [first, ...others];
  const ownEntitlement = all.map((_, index) => activationOf(seeded.customerCodes[index]));
  const load: LoadOptions = { connections: CONNECTIONS, seconds: Number(seconds), warmupSeconds: 1 };
  const spread: LoadOptions = { ...load, connections: CONNECTIONS / all.length };
  const figures = { one: [] as number[], spread: [] as number[], spreadOwnEntitlements: [] as number[] };
  const driveAll = async (targetOf: (index: number) => HttpTarget) => {
    const each = await Promise.all(all.map((instance, index) => driveHttp(instance.baseUrl, targetOf(index), spread)));
    if (each.some((figure) => figure.failures > 0)) throw new Error("activations failed");
    return each.reduce((sum, figure) => sum + figure.requestsPerSecond, 0);
  };
  for (let round = 0; round < Number(rounds); round++) {
    figures.one.push((await driveHttp(first.baseUrl, activate, load)).requestsPerSecond);
    figures.spread.push(await driveAll(() => activate));
    figures.spreadOwnEntitlements.push(await driveAll((index) => ownEntitlement[index]));
  }
  console.log(JSON.stringify({ path: activate.name, instances: all.length, activationsPerSecond: figures }, null, 2));
}

/** Fresh devices activating one code. */
function activationOf(activationCode: string): HttpTarget {
  let devices = 0;
  return {
    name: "activation of its own entitlement",
    method: "POST",
    path: ACTIVATE,
    headers: { "content-type": "application/json" },
    body: () => JSON.stringify({ activationCode, fingerprint: `own-${process.pid}-${activationCode}-${++devices}` }),
  };
}

ensureCompiled();
pinSelf();
await onFreshStorage("mysql", measure);
