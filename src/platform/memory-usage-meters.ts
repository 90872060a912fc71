import { setNewest } from "./bounded-map.js";
import type { MeterKey, MeterMode, ReserveOutcome, ReserveRequest, UsageMeters } from "./usage-meters.js";

interface Counter {
  generation: number;
  value: number;
  limit: number | null;
}

/** Counters kept beyond this many are forgotten oldest first: a forgotten counter is rebuilt when next used. */
const MAX_COUNTERS = 100_000;

/** The counters of one embedded instance, in its memory; the same rules as the Redis scripts. */
export class MemoryUsageMeters implements UsageMeters {
  private readonly counters = new Map<string, Counter>();

  async reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const counter = this.counters.get(keyOf(request.key));
    if (!counter || (request.generation !== undefined && counter.generation !== request.generation)) {
      return { kind: "missing" };
    }
    const { generation, value: before, limit } = counter;
    const after = request.mode === "peak" ? Math.max(before, request.amount) : before + request.amount;
    const cap = request.cap === "stored" ? limit : request.cap;
    if (cap !== undefined && cap !== null && after > cap) return { kind: "refused", generation, value: before, limit };
    counter.value = after;
    return { kind: "reserved", generation, before, after, limit };
  }

  async release(key: MeterKey, generation: number, amount: number, mode: MeterMode): Promise<void> {
    const counter = this.counters.get(keyOf(key));
    if (!counter || counter.generation !== generation) return;
    if (mode === "peak") this.counters.delete(keyOf(key));
    else counter.value -= amount;
  }

  async generationOf(key: MeterKey): Promise<number | null> {
    return this.counters.get(keyOf(key))?.generation ?? null;
  }

  async load(key: MeterKey, generation: number, value: number, limit: number | null): Promise<void> {
    const name = keyOf(key);
    const counter = this.counters.get(name);
    if (counter && counter.generation >= generation) return;
    setNewest(this.counters, name, { generation, value, limit }, MAX_COUNTERS);
  }
}

function keyOf(key: MeterKey): string {
  return `${key.assetId}:${key.periodStartMs}`;
}
