import fs from "node:fs";
import path from "node:path";
import { freePort, SERVER_CORE, spawnNode, waitFor200 } from "./processes.js";
import type { GrpcReply, Reply } from "./replies.js";

/** The bare server (bench/bare-server.mjs) on the server core, replaying `http1` and `h2c` replies; its ports. */
export async function startBare(scratch: string, http1: Record<string, Reply>, h2c: Record<string, GrpcReply> = {}) {
  const file = path.join(scratch, `replies-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.json`);
  fs.writeFileSync(file, JSON.stringify({ http1, h2c }));
  const [http1Port, h2cPort] = [await freePort(), await freePort()];
  const started = performance.now();
  const bare = spawnNode(["bench/bare-server.mjs", file, String(http1Port), String(h2cPort)], { core: SERVER_CORE });
  const readyMs = await waitFor200(`http://127.0.0.1:${http1Port}/healthz`, started, bare.child);
  return { bare, readyMs, http1Url: `http://127.0.0.1:${http1Port}`, h2cAddress: `127.0.0.1:${h2cPort}` };
}
