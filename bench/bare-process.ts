import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureCompiled } from "../test/support/compiled-build.js";
import { freePort, pinSelf, SERVER_CORE, spawnNode, waitFor200 } from "./processes.js";
import { createStorage, type Mode, profiledMain, type RunningProvision, startProvision } from "./provision-server.js";
import type { GrpcReply, Reply } from "./replies.js";

/** The bare server (bench/bare-server.mjs) on the server core, replaying `http1` and `h2c` replies; its ports. */
export async function startBare(
  scratch: string,
  http1: Record<string, Reply>,
  h2c: Record<string, GrpcReply> = {},
  nodeFlags: string[] = [],
) {
  const file = path.join(scratch, `replies-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.json`);
  fs.writeFileSync(file, JSON.stringify({ http1, h2c }));
  const [http1Port, h2cPort] = [await freePort(), await freePort()];
  const started = performance.now();
  const bare = spawnNode([...nodeFlags, "bench/bare-server.mjs", file, String(http1Port), String(h2cPort)], {
    core: SERVER_CORE,
  });
  const readyMs = await waitFor200(`http://127.0.0.1:${http1Port}/healthz`, started, bare.child);
  return { bare, readyMs, http1Url: `http://127.0.0.1:${http1Port}`, h2cAddress: `127.0.0.1:${h2cPort}` };
}

/**
 * The compiled service on fresh storage (pinned, as `npm run bench` runs it) and the bare server replaying the
 * `replies` that `prepare` records from it; runs `measure` against both, then stops them and removes the storage.
 * With `profiles`, each process runs under --cpu-prof and writes its profile into its folder when stopped.
 */
export async function besideBare<Prepared extends { replies: Record<string, Reply> }>(
  mode: Mode,
  prepare: (provision: RunningProvision) => Promise<Prepared>,
  measure: (provision: RunningProvision, bare: { url: string; pid: number }, prepared: Prepared) => Promise<void>,
  profiles?: { service: string; bare: string },
): Promise<void> {
  ensureCompiled();
  pinSelf();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "provision-beside-bare-"));
  const storage = await createStorage(mode);
  try {
    const logLevel = process.env.BENCH_LOG_LEVEL ?? "info";
    const provision = await startProvision(storage, logLevel, undefined, profiles && profiledMain(profiles.service));
    const prepared = await prepare(provision);
    const bareFlags = profiles ? ["--cpu-prof", `--cpu-prof-dir=${profiles.bare}`] : [];
    const { bare, http1Url } = await startBare(scratch, prepared.replies, {}, bareFlags);
    await measure(provision, { url: http1Url, pid: bare.child.pid ?? 0 }, prepared);
    await bare.stop();
    await provision.stop();
  } finally {
    await storage.remove();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
