import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { COMPILED_MAIN, SERVICE_NODE_FLAGS } from "../test/support/compiled-build.js";
import { REPO_ROOT } from "../test/support/provision-process.js";
import { createTestDatabase, TEST_REDIS_URL } from "../test/support/test-server.js";
import { freePort, killChildren, rssMiB, SERVER_CORE, type Spawned, spawnNode, waitFor200 } from "./processes.js";

export type Mode = "embedded" | "mysql";

/** Where one run of the service keeps its data: a fresh SQLite file, or a throwaway MySQL database and Redis. */
export interface Storage {
  mode: Mode;
  env: Record<string, string>;
  /** The SQLite file or the MySQL URL, for the raw-INSERT baseline. */
  databaseUrl: string;
  remove(): Promise<void>;
}

const existing = new Set<Storage>();

/** Removes whatever storage is left, when the run is interrupted. */
export async function removeAllStorage(): Promise<void> {
  for (const storage of existing) await storage.remove().catch(() => undefined);
}

export async function createStorage(mode: Mode): Promise<Storage> {
  const storage = await newStorage(mode);
  existing.add(storage);
  return {
    ...storage,
    remove: async () => {
      existing.delete(storage);
      await storage.remove();
    },
  };
}

/**
 * A measurement script's work on a fresh storage of `mode`: the storage is removed and every child process killed
 * afterwards, whatever happened.
 */
export async function onFreshStorage(mode: Mode, work: (storage: Storage) => Promise<void>): Promise<void> {
  try {
    const storage = await createStorage(mode);
    try {
      await work(storage);
    } finally {
      await storage.remove();
    }
  } finally {
    killChildren();
  }
}

async function newStorage(mode: Mode): Promise<Storage> {
  if (mode === "embedded") {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-bench-"));
    const databaseUrl = `sqlite:${path.join(folder, "provision.sqlite")}`;
    return {
      mode,
      env: { DATABASE_URL: databaseUrl },
      databaseUrl,
      remove: async () => fs.rmSync(folder, { recursive: true, force: true }),
    };
  }
  const database = await createTestDatabase();
  return {
    mode,
    env: { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL },
    databaseUrl: database.url,
    remove: () => database.drop(),
  };
}

/**
 * The service run so that it writes a V8 CPU profile into `folder` when it stops: tsc's unbundled output (the
 * same code, but each function keeps its file and line), for startProvision's `main`.
 */
export function profiledMain(folder: string): string[] {
  return [
    ...SERVICE_NODE_FLAGS,
    "--cpu-prof",
    `--cpu-prof-dir=${folder}`,
    path.join(REPO_ROOT, "dist", "src", "main.js"),
  ];
}

export interface RunningProvision extends Spawned {
  baseUrl: string;
  port: number;
  admin: { clientId: string; clientSecret: string };
  /** Milliseconds from spawn to the first 200 of /healthz. */
  readyMs: number;
}

/** The compiled service (what `npm start` runs) in its own process, pinned to the server core. */
export async function startProvision(
  storage: Storage,
  logLevel: string,
  admin = { clientId: `bench-${randomBytes(4).toString("hex")}`, clientSecret: randomBytes(32).toString("hex") },
  main = [...SERVICE_NODE_FLAGS, COMPILED_MAIN],
): Promise<RunningProvision> {
  const port = await freePort();
  const started = performance.now();
  const spawned = spawnNode(main, {
    core: SERVER_CORE,
    env: {
      ...storage.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: logLevel,
      PROVISION_BOOTSTRAP_CLIENT_ID: admin.clientId,
      PROVISION_BOOTSTRAP_CLIENT_SECRET: admin.clientSecret,
      TOKEN_RATE_LIMIT_PER_ADDRESS: "100000",
      ACTIVATION_RATE_LIMIT_PER_ADDRESS: "100000",
    },
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    const readyMs = await waitFor200(`${baseUrl}/healthz`, started, spawned.child);
    return { ...spawned, baseUrl, port, admin, readyMs };
  } catch (error) {
    await spawned.stop();
    throw new Error(`${(error as Error).message}; stderr: ${spawned.stderr()}`);
  }
}

export interface StartupFigures {
  /** Spawn → first 200 on fresh storage: migrations, a signing key and the bootstrap client's secret hash. */
  runs: number[];
  medianMs: number;
  /** Spawn → first 200 again on the same storage, as after a deploy or a crash. */
  restartRuns: number[];
  restartMedianMs: number;
  idleRssMiB: number;
}

/**
 * Starts the service `runs` times on fresh storage and once more on each, measuring spawn → first 200 of
 * /healthz both times, and its resident memory after `settleMs` of idling after the first start.
 */
export async function measureStartup(mode: Mode, runs: number, settleMs = 1000): Promise<StartupFigures> {
  const first: number[] = [];
  const again: number[] = [];
  const rss: number[] = [];
  for (let run = 0; run < runs; run++) {
    const storage = await createStorage(mode);
    try {
      const server = await startProvision(storage, "info");
      first.push(Math.round(server.readyMs));
      await new Promise((resolve) => setTimeout(resolve, settleMs));
      rss.push(rssMiB(server.child.pid ?? 0));
      await server.stop();
      const restarted = await startProvision(storage, "info", server.admin);
      again.push(Math.round(restarted.readyMs));
      await restarted.stop();
    } finally {
      await storage.remove();
    }
  }
  return {
    runs: first,
    medianMs: median(first),
    restartRuns: again,
    restartMedianMs: median(again),
    idleRssMiB: median(rss),
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : Math.round((sorted[middle - 1] + sorted[middle]) / 2);
}
