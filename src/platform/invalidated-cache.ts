import type { Clock } from "./clock.js";
import type { InvalidationBus } from "./invalidation-bus.js";

export interface InvalidatedCacheOptions<V> {
  /** The bus channel on which a message is the key of an entry to drop. */
  channel: string;
  bus: InvalidationBus;
  clock: Clock;
  /** Entries kept at most; the least recently used goes first. */
  capacity: number;
  /** With `weigh`: the most the kept values may weigh in all (a value heavier alone is not kept). */
  maxWeight?: number;
  weigh?: (value: V) => number;
  /** A bound on staleness should an invalidation never arrive (published while Redis was down, say). */
  maxAgeMs: number;
  /** Whether a loaded value may be kept; every value when absent. */
  keeps?: (value: V) => boolean;
}

/** An entry used again within this long keeps its place in the eviction order (moving it costs on every call). */
const REORDER_AFTER_MS = 1000;

/** A load under way; an invalidation of its key while it runs makes it stale (answered, not kept). */
interface Load<V> {
  promise: Promise<V>;
  stale: boolean;
}

/**
 * Values loaded on a miss and kept in this instance until their key's change is published on the invalidation
 * bus, by any instance. The bus can miss messages, so: nothing is kept while it is not listening, everything is
 * dropped when it resets, a load that raced an invalidation of its key is not kept, and no entry is served past
 * its maximum age. Callers that miss the same key at once share one load. The eviction order is least recently
 * used to within a second.
 */
export class InvalidatedCache<V> {
  private readonly entries = new Map<string, { value: V; loadedAtMs: number; usedAtMs: number; weight: number }>();
  private readonly loads = new Map<string, Load<V>>();
  private weight = 0;

  private constructor(private readonly options: InvalidatedCacheOptions<V>) {}

  static async create<V>(options: InvalidatedCacheOptions<V>): Promise<InvalidatedCache<V>> {
    const cache = new InvalidatedCache(options);
    await options.bus.subscribe(
      options.channel,
      (key) => cache.forget(key),
      () => cache.forgetAll(),
    );
    return cache;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value kept for `key`, else what `load` answers (kept when the rules allow). */
  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = this.options.clock.now().getTime();
    const cached = this.kept(key, now);
    return cached ? Promise.resolve(cached.value) : this.load(key, load, now);
  }

  /** The value kept for `key` at `nowMs`, without loading it: undefined when none may be served. */
  peek(key: string, nowMs = this.options.clock.now().getTime()): V | undefined {
    return this.kept(key, nowMs)?.value;
  }

  private kept(key: string, now: number) {
    const cached = this.entries.get(key);
    if (!cached || now - cached.loadedAtMs >= this.options.maxAgeMs || !this.options.bus.listening) return undefined;
    if (now - cached.usedAtMs > REORDER_AFTER_MS) {
      this.entries.delete(key);
      this.entries.set(key, cached);
      cached.usedAtMs = now;
    }
    return cached;
  }

  private async load(key: string, load: () => Promise<V>, now: number): Promise<V> {
    const { bus, keeps } = this.options;
    const running = this.loads.get(key);
    if (running) return running.promise;
    const started: Load<V> = { promise: load(), stale: false };
    this.loads.set(key, started);
    try {
      const value = await started.promise;
      if (!started.stale && bus.listening && (keeps?.(value) ?? true)) this.remember(key, value, now);
      return value;
    } finally {
      if (this.loads.get(key) === started) this.loads.delete(key);
    }
  }

  /** Tells every instance (this one included) that the values of `keys` changed. */
  async changed(...keys: string[]): Promise<void> {
    for (const key of keys) this.forget(key);
    await Promise.all(keys.map((key) => this.options.bus.publish(this.options.channel, key)));
  }

  private remember(key: string, value: V, now: number): void {
    const { capacity, maxWeight = Number.POSITIVE_INFINITY, weigh } = this.options;
    const weight = weigh?.(value) ?? 1;
    this.drop(key);
    if (weight > maxWeight) return;
    this.entries.set(key, { value, loadedAtMs: now, usedAtMs: now, weight });
    this.weight += weight;
    while (this.entries.size > capacity || this.weight > maxWeight)
      this.drop(this.entries.keys().next().value as string);
  }

  private forget(key: string): void {
    const running = this.loads.get(key);
    if (running) {
      running.stale = true;
      this.loads.delete(key);
    }
    this.drop(key);
  }

  private forgetAll(): void {
    for (const running of this.loads.values()) running.stale = true;
    this.loads.clear();
    this.entries.clear();
    this.weight = 0;
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.weight -= entry.weight;
  }
}
