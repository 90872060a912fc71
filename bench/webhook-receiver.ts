import { freePort, LOAD_CORE, type Spawned, spawnNode, waitFor200 } from "./processes.js";

/** What the receiver process recorded since its last reset (bench/webhook-receiver-process.mjs). */
export interface ReceiverFigures {
  received: number;
  /** Distinct (endpoint, webhook-id) pairs. */
  unique: number;
  duplicates: number;
  badSignatures: number;
  challenges: number;
  /** Arrival times, in milliseconds on the monotonic clock (`monotonicMs`). */
  arrivals: number[];
  /** The first arrival of each `data.numberOfSeats` value. */
  bySeats: Record<string, number>;
}

/** The webhook endpoint process, pinned to the load core: subscription n posts to `hookUrl(n)`. */
export interface BenchReceiver extends Spawned {
  baseUrl: string;
  hookUrl(index: number): string;
  reset(): Promise<void>;
  /** Deliveries received since the last reset. */
  count(): Promise<number>;
  figures(): Promise<ReceiverFigures>;
}

/** Now on the monotonic clock every process on the machine shares (CLOCK_MONOTONIC), in milliseconds. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Starts the receiver, verifying endpoint n's deliveries with `secrets[n]`. */
export async function startBenchReceiver(secrets: string[]): Promise<BenchReceiver> {
  const port = await freePort();
  const started = performance.now();
  const spawned = spawnNode(["bench/webhook-receiver-process.mjs", String(port), JSON.stringify(secrets)], {
    core: LOAD_CORE,
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitFor200(`${baseUrl}/healthz`, started, spawned.child);
  } catch (error) {
    await spawned.stop();
    throw new Error(`${(error as Error).message}; stderr: ${spawned.stderr()}`);
  }
  const control = async (method: string, path: string) => {
    const response = await fetch(`${baseUrl}${path}`, { method });
    if (!response.ok) throw new Error(`receiver ${method} ${path} answered ${response.status}`);
    return response.status === 204 ? undefined : response.json();
  };
  return {
    ...spawned,
    baseUrl,
    hookUrl: (index) => `${baseUrl}/hook/${index}`,
    reset: async () => {
      await control("POST", "/reset");
    },
    count: async () => ((await control("GET", "/count")) as { received: number }).received,
    figures: async () => (await control("GET", "/figures")) as ReceiverFigures,
  };
}
