/**
 * CPU per request, the service against the bare server, at one paced rate:
 *   node --import tsx bench/cpu-per-request.ts <checkIn|healthz|preallocate> [mysql|embedded] [rate] [rounds]
 * starts the compiled service (pinned to its core, as `npm run bench` does) and the bare server replaying its
 * answers, then sends the path to each in turn at `rate` requests per second (default 3,000) for 2 s, `rounds`
 * times (default 5), and prints the CPU microseconds each process used per request in every round, their medians
 * and the ratio of the medians (bare ÷ service) as JSON. On a machine whose throughput moves between runs, CPU per
 * request at a fixed pace moves far less: a change to the service shows as a few percent here.
 */
import { besideBare } from "./bare-process.js";
import type { HttpTarget } from "./http-load.js";
import { drivePaced } from "./paced-load.js";
import { cpuSecondsOf, killChildren } from "./processes.js";
import { type Mode, median } from "./provision-server.js";
import { singlePathOf } from "./single-path-targets.js";

const [pathName = "checkIn", mode = "mysql", rate = "3000", rounds = "5"] = process.argv.slice(2);
const WINDOW_SECONDS = 2;

/** CPU microseconds `pid` used per request while `url` was sent the target at the pace. */
async function microsecondsPerRequest(url: string, pid: number, target: HttpTarget): Promise<number> {
  const pace = { connections: 32, seconds: WINDOW_SECONDS, warmupSeconds: 0, rate: Number(rate) };
  const before = cpuSecondsOf(pid);
  const figures = await drivePaced(url, target, pace);
  if (figures.failures > 0) throw new Error(`${figures.failures} requests to ${url} failed`);
  return ((cpuSecondsOf(pid) - before) * 1e6) / (pace.rate * pace.seconds);
}

async function main() {
  await besideBare(mode as Mode, singlePathOf(pathName), async (provision, bare, { target }) => {
    const sides = [
      { url: provision.baseUrl, pid: provision.child.pid ?? 0, figures: [] as number[] },
      { url: bare.url, pid: bare.pid, figures: [] as number[] },
    ];
    for (const side of sides) await microsecondsPerRequest(side.url, side.pid, target);
    for (let round = 0; round < Number(rounds); round++) {
      for (const side of sides) side.figures.push(await microsecondsPerRequest(side.url, side.pid, target));
    }
    const [service, baseline] = sides.map((side) => median(side.figures));
    console.log(
      JSON.stringify({
        path: target.name,
        mode,
        rate: Number(rate),
        serviceMicroseconds: sides[0].figures.map(Math.round),
        bareMicroseconds: sides[1].figures.map(Math.round),
        serviceMedian: Math.round(service),
        bareMedian: Math.round(baseline),
        ratio: Number((baseline / service).toFixed(3)),
      }),
    );
  });
}

try {
  await main();
} finally {
  killChildren();
}
