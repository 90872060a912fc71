import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import { REPO_ROOT } from "../test/support/provision-process.js";
import type { LoadFigures } from "./http-load.js";

/** The server's core and the load generator's: one each, so neither takes CPU from the other. */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

const children = new Set<ChildProcess>();

/** Whether `taskset` can pin processes here (Linux with util-linux and at least two cores). */
export const canPin = os.cpus().length >= 2 && hasTaskset();

function hasTaskset(): boolean {
  try {
    execFileSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Moves this process (the load generator) to its core; children it spawns unpinned inherit it. */
export function pinSelf(): void {
  if (canPin) execFileSync("taskset", ["-cp", String(LOAD_CORE), String(process.pid)], { stdio: "ignore" });
}

export interface Spawned {
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** Spawns `node args` pinned to `core`, in the repository, with `env` over the current environment. */
export function spawnNode(
  args: string[],
  { core, env = {}, stdout = "ignore" }: { core: number; env?: Record<string, string>; stdout?: "ignore" | "pipe" },
): Spawned {
  const [command, commandArgs] = canPin
    ? ["taskset", ["-c", String(core), process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, commandArgs, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", stdout, "pipe"],
  });
  children.add(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  exited.then(() => children.delete(child));
  return {
    child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Kills every child still running: on exit, whatever happened. */
export function killChildren(): void {
  for (const child of children) child.kill("SIGKILL");
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `GET url` until it answers 200; resolves with the milliseconds since `since` (performance.now()). */
export async function waitFor200(url: string, since: number, child: ChildProcess, timeoutMs = 30_000): Promise<number> {
  while (performance.now() - since < timeoutMs) {
    if (child.exitCode !== null) throw new Error(`the process exited (${child.exitCode}) before answering ${url}`);
    if ((await statusOf(url)) === 200) return performance.now() - since;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
}

function statusOf(url: string): Promise<number> {
  return new Promise((resolve) => {
    const request = http.get(url, { agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once("error", () => resolve(0));
  });
}

/** Resident set size of a process, in MiB (Linux /proc). */
export function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return Math.round(kiB / 1024);
}

/** The running MariaDB server's process id (its first, if `pidof` names several). */
export function mariadbPid(): number {
  return Number(execFileSync("pidof", ["mariadbd"], { encoding: "utf8" }).trim().split(" ")[0]);
}

/** User + system CPU seconds a process has used so far (Linux /proc; clock ticks of 10 ms). */
export function cpuSecondsOf(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The JSON line a load or raw-INSERT process prints when it is done (its last line of output). */
export async function figuresOf<Figures = LoadFigures>(spawned: Spawned): Promise<Figures> {
  let output = "";
  spawned.child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => spawned.child.once("close", resolve));
  if (code !== 0) throw new Error(`load process failed (${code}): ${spawned.stderr()}`);
  return JSON.parse(output.trim().split("\n").at(-1) ?? "{}") as Figures;
}
