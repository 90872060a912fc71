/**
 * Where the service's CPU per request goes beyond the bare server's, function by function:
 *   node --import tsx bench/profile-beside-bare.ts <checkIn|healthz|preallocate> [mysql|embedded] [seconds]
 * starts the compiled service and the bare server replaying its answers, both pinned to the server core and
 * under --cpu-prof, drives each with the benchmark's closed-loop load for `seconds` (default 6, after 1 s of
 * warm-up) one after the other, and prints as JSON each side's requests/s and busy CPU microseconds per request
 * (the ratio of the two is what the benchmark's throughput ratio tends to), then the files and functions whose
 * self time per request differs most between them: `[function, service µs, bare µs]`.
 */
import fs from "node:fs";
import { besideBare } from "./bare-process.js";
import { microsecondsPerRequest, monotonicMicroseconds, profileFolder, profileIn } from "./cpu-profile.js";
import { driveHttp, type HttpTarget, type LoadFigures } from "./http-load.js";
import { killChildren } from "./processes.js";
import type { Mode } from "./provision-server.js";
import { singlePathOf } from "./single-path-targets.js";

const [pathName = "checkIn", mode = "embedded", seconds = "6"] = process.argv.slice(2);
const WARMUP_SECONDS = 1;
const IDLE = "(idle)";

interface Side {
  folder: string;
  figures?: LoadFigures;
  window?: { fromUs: number; toUs: number };
}

async function drive(url: string, target: HttpTarget, side: Side): Promise<void> {
  const fromUs = monotonicMicroseconds() + WARMUP_SECONDS * 1e6;
  side.figures = await driveHttp(url, target, {
    connections: 32,
    seconds: Number(seconds),
    warmupSeconds: WARMUP_SECONDS,
  });
  side.window = { fromUs, toUs: monotonicMicroseconds() };
}

function perRequest(side: Side) {
  const { figures, window } = side as Required<Side>;
  const requests = (figures.requestsPerSecond * (window.toUs - window.fromUs)) / 1e6;
  return microsecondsPerRequest(
    profileIn(side.folder, () => ""),
    { ...window, requests },
  );
}

function busy(spent: Map<string, number>): number {
  let total = 0;
  for (const [name, microseconds] of spent) if (name !== IDLE) total += microseconds;
  return total;
}

/** The entries whose service and bare figures differ most, rounded to 0.01 µs. */
function largestDifferences(service: Map<string, number>, bare: Map<string, number>, top: number) {
  const round = (value: number) => Math.round(value * 100) / 100;
  return [...new Set([...service.keys(), ...bare.keys()])]
    .filter((name) => name !== IDLE)
    .map((name) => [name, service.get(name) ?? 0, bare.get(name) ?? 0] as const)
    .sort((a, b) => b[1] - b[2] - (a[1] - a[2]))
    .slice(0, top)
    .map(([name, ours, theirs]) => [name, round(ours), round(theirs)]);
}

async function main() {
  const service: Side = { folder: profileFolder() };
  const bare: Side = { folder: profileFolder() };
  await besideBare(
    mode as Mode,
    singlePathOf(pathName),
    async (provision, bareServer, { target }) => {
      await drive(provision.baseUrl, target, service);
      await drive(bareServer.url, target, bare);
    },
    { service: service.folder, bare: bare.folder },
  );
  const [ours, theirs] = [service, bare].map(perRequest);
  const busyMicroseconds = { service: busy(ours.byFunction), bare: busy(theirs.byFunction) };
  console.log(
    JSON.stringify(
      {
        path: pathName,
        mode,
        requestsPerSecond: { service: service.figures?.requestsPerSecond, bare: bare.figures?.requestsPerSecond },
        busyMicroseconds: { service: Math.round(busyMicroseconds.service), bare: Math.round(busyMicroseconds.bare) },
        busyRatio: Number((busyMicroseconds.bare / busyMicroseconds.service).toFixed(3)),
        byFile: largestDifferences(ours.byFile, theirs.byFile, 25),
        byFunction: largestDifferences(ours.byFunction, theirs.byFunction, 40),
        profiles: [service.folder, bare.folder],
      },
      null,
      1,
    ),
  );
  for (const side of [service, bare]) if (!process.env.KEEP_PROFILES) fs.rmSync(side.folder, { recursive: true });
}

try {
  await main();
} finally {
  killChildren();
}
