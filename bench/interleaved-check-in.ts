/**
 * Check-in against the bare server in alternating windows, to compare two versions of the service on this
 * noisy machine: `node --import tsx bench/interleaved-check-in.ts [embedded|mysql] [rounds] [seconds]` starts
 * the compiled service and the bare server replaying its check-in answer, then drives each in turn for
 * `seconds` (default 1), `rounds` times (default 10), and prints every round's ratio and their median as JSON.
 * Both run while the machine is in the same state, so their ratio moves far less than either figure does.
 */
import { besideBare } from "./bare-process.js";
import { seedCatalog } from "./catalog-fixture.js";
import { driveHttp } from "./http-load.js";
import { licensingTargets, onEverySession, seedLicensing } from "./licensing-fixture.js";
import { killChildren } from "./processes.js";
import { type Mode, median, type RunningProvision } from "./provision-server.js";
import { recordHttp } from "./replies.js";

const [mode = "embedded", rounds = "10", seconds = "1"] = process.argv.slice(2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

/** The check-in target on a seeded fixture, and the answers the bare server replays for it. */
async function checkInOf(provision: RunningProvision) {
  const fixture = await seedCatalog(provision.baseUrl, provision.admin);
  const { checkIn } = licensingTargets(
    await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId),
  );
  const healthz = { name: "/healthz", method: "GET" as const, path: "/healthz", headers: {} };
  const replies = {
    "GET /healthz": await recordHttp(provision.baseUrl, healthz),
    ...onEverySession(checkIn, await recordHttp(provision.baseUrl, checkIn)),
  };
  return { checkIn, replies };
}

async function main() {
  await besideBare(mode as Mode, checkInOf, async (provision, bare, { checkIn }) => {
    const load = { connections: CONNECTIONS, seconds: Number(seconds), warmupSeconds: 0 };
    await driveHttp(provision.baseUrl, checkIn, load);
    await driveHttp(bare.url, checkIn, load);
    const ratios: number[] = [];
    for (let round = 0; round < Number(rounds); round++) {
      const service = await driveHttp(provision.baseUrl, checkIn, load);
      const baseline = await driveHttp(bare.url, checkIn, load);
      if (service.failures > 0) throw new Error(`${service.failures} check-ins failed`);
      ratios.push(Number((service.requestsPerSecond / baseline.requestsPerSecond).toFixed(3)));
    }
    console.log(
      JSON.stringify({ mode, connections: CONNECTIONS, ratios, median: median(ratios.map((r) => r * 1000)) / 1000 }),
    );
  });
}

try {
  await main();
} finally {
  killChildren();
}
