import type { LicensedSession } from "../test/support/observability.js";
import { startBare } from "./bare-process.js";
import { driveHttp, type HttpTarget, type LoadFigures, type LoadOptions } from "./http-load.js";
import { driveIngest } from "./ingest-load.js";
import { onEverySession } from "./licensing-fixture.js";
import { figuresOf, SERVER_CORE, type Spawned, spawnNode } from "./processes.js";
import { createStorage, type Mode, type RunningProvision, type Storage, startProvision } from "./provision-server.js";
import { recordHttp } from "./replies.js";
import { type PathResult, pathResult } from "./report.js";
import { BATCH, preallocateTarget, seedUsage } from "./usage-fixture.js";

const HEALTHZ: HttpTarget = { name: "/healthz", method: "GET", path: "/healthz", headers: {} };

/**
 * Usage metering, on a service of its own (fresh storage): pre-allocation of 1 against the bare server replaying
 * its reply, then ingest of batches of `BATCH` usage transactions (bench/ingest-load.ts) against raw multi-row
 * INSERTs of the same rows into the service's `usage_records` (bench/usage-raw-insert.ts), both timed by the same
 * closed loops, each for the measurement's seconds.
 */
export async function usageRows(mode: Mode, load: LoadOptions, logLevel: string, scratch: string) {
  console.error(`[${mode}] usage: service and sessions`);
  const storage = await createStorage(mode);
  const running: Spawned[] = [];
  try {
    const provision = await startProvision(storage, logLevel);
    running.push(provision);
    const sessions = await seedUsage(provision.baseUrl, provision.admin);
    const preallocation = await preallocationRow(mode, provision, sessions, load, scratch, running);
    return [preallocation, await ingestRow(mode, provision, storage, sessions, load)];
  } finally {
    for (const child of running.reverse()) await child.stop();
    await storage.remove();
  }
}

async function preallocationRow(
  mode: Mode,
  provision: RunningProvision,
  sessions: LicensedSession[],
  load: LoadOptions,
  scratch: string,
  running: Spawned[],
): Promise<PathResult> {
  const { target, tally } = preallocateTarget(sessions);
  console.error(`[${mode}] ${target.name}`);
  const replies = {
    "GET /healthz": await recordHttp(provision.baseUrl, HEALTHZ),
    ...onEverySession(target, await recordHttp(provision.baseUrl, target)),
  };
  const { bare, http1Url } = await startBare(scratch, replies);
  running.push(bare);
  const measured = await driveHttp(provision.baseUrl, target, load);
  if (tally.checked === 0) throw new Error("no pre-allocation answer was checked");
  // An answer that grants nothing did not do the work the row measures.
  const checked = { ...measured, failures: measured.failures + tally.refused };
  if (tally.refused > 0) console.error(`[${mode}] ${tally.refused} pre-allocations were not granted`);
  return pathResult(target.name, checked, await driveHttp(http1Url, target, load), "bare", "≥ 0.4× bare");
}

async function ingestRow(
  mode: Mode,
  provision: RunningProvision,
  storage: Storage,
  sessions: LicensedSession[],
  load: LoadOptions,
): Promise<PathResult> {
  const name = `usage ingest, events/s (batches of ${BATCH}, ${sessions.length} sessions, closed loop)`;
  console.error(`[${mode}] ${name}`);
  const { figures: measured, tally } = await driveIngest(provision.baseUrl, sessions, load);
  if (tally.batches === 0) throw new Error("no ingest batch was answered");
  console.error(`[${mode}] raw multi-row INSERTs of ${BATCH} usage records`);
  const raw = await figuresOf<LoadFigures & { storedByService: number }>(
    spawnNode(
      [
        "--import",
        "tsx",
        "bench/usage-raw-insert.ts",
        JSON.stringify({ databaseUrl: storage.databaseUrl, batch: BATCH, ...load, concurrency: load.connections }),
      ],
      { core: SERVER_CORE, stdout: "pipe" },
    ),
  );
  // Every batch answered must have been accepted whole, and the table must hold exactly the items acknowledged
  // (every batch sent was waited for).
  const mismatched = Math.abs(tally.accepted - raw.storedByService);
  console.error(
    `[${mode}] ${tally.batches} batches answered, ${tally.accepted} items accepted, ${raw.storedByService} stored`,
  );
  if (tally.notAllAccepted > 0 || mismatched > 0) {
    console.error(
      `[${mode}] ${tally.notAllAccepted} batches not accepted whole; stored and acknowledged differ by ${mismatched}`,
    );
  }
  const checked = { ...measured, failures: measured.failures + tally.notAllAccepted + mismatched };
  return pathResult(name, perEvent(checked), perEvent(raw), "raw insert", "≥ 50,000/s, ≥ 0.7× raw");
}

/** Batch figures as events per second (latencies stay those of a batch). */
function perEvent({ requestsPerSecond, p50Ms, p99Ms, failures }: LoadFigures): LoadFigures {
  return { requestsPerSecond: requestsPerSecond * BATCH, p50Ms, p99Ms, failures };
}
