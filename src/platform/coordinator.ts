/**
 * What must be atomic and fast across instances: seat leases, metering counters, rate limits and short
 * locks. Redis in production (`redis-coordinator.ts`), in-process for one embedded instance
 * (`memory-coordinator.ts`); both honour the same contract (test/integration/coordinator-contract.test.ts).
 */
export interface Coordinator {
  readonly kind: "redis" | "memory";
  ping(): Promise<void>;
  /**
   * Counts one hit against `key` in a fixed window of `windowMs` that starts with the key's first hit.
   * Hits beyond `limit` in the window are refused until it ends, `retryAfterMs` from now.
   */
  hit(key: string, limit: number, windowMs: number): Promise<RateDecision>;
  /** The hits counted against `key` in its current window, without counting one; 0 when there is none. */
  peek(key: string): Promise<{ count: number; retryAfterMs: number }>;
  close(): Promise<void>;
}

export interface RateDecision {
  allowed: boolean;
  /** Hits counted in the current window, this one included. */
  count: number;
  retryAfterMs: number;
}
