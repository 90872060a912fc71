import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import { createClient } from "@redis/client";

export interface OwnRedis {
  url: string;
  port: number;
  /** Empties every database, as FLUSHALL does; connected clients stay connected. */
  flushAll(): Promise<void>;
  /** Kills the server (SIGKILL, nothing saved) and starts an empty one on the same port: every client loses its connection. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const READY = "Ready to accept connections";
const START_TIMEOUT_MS = 10_000;

/**
 * A redis-server of the test's own on a free port of 127.0.0.1, without persistence, so a test may wipe or
 * restart it without disturbing other test files that share the machine's Redis.
 */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  let child = await spawnRedis(port);
  const url = `redis://127.0.0.1:${port}`;
  return {
    url,
    port,
    async flushAll() {
      const client = createClient({ url });
      await client.connect();
      try {
        await client.flushAll();
      } finally {
        await client.close();
      }
    },
    async restart() {
      await killed(child);
      child = await spawnRedis(port);
    },
    stop: () => killed(child),
  };
}

function spawnRedis(port: number): Promise<ChildProcess> {
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
  const child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`redis-server not ready within ${START_TIMEOUT_MS} ms: ${output}`)),
      START_TIMEOUT_MS,
    );
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(error);
    };
    child.once("error", (error: NodeJS.ErrnoException) =>
      fail(
        error.code === "ENOENT"
          ? new Error("redis-server is not on PATH: this test runs a Redis of its own (install redis-server)")
          : error,
      ),
    );
    child.once("exit", (code) => fail(new Error(`redis-server exited (${code}) before it was ready: ${output}`)));
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      if (!output.includes(READY)) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      resolve(child);
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
  });
}

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

/** A port nothing listens on now (the kernel's pick for an ephemeral listener, closed again). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
