/** One counter: an asset's consumption in one period (or a credit balance's use in one balance period). */
export interface MeterKey {
  assetId: string;
  periodStartMs: number;
}

/** `sum` adds each amount; `peak` keeps the highest amount. */
export type MeterMode = "sum" | "peak";

export interface ReserveRequest {
  key: MeterKey;
  /** Micro-units, an integer. */
  amount: number;
  mode: MeterMode;
  /**
   * Refused when the new value would exceed this (micro-units); `stored`: the counter's own limit (a credit
   * balance's total, kept with it); undefined: never refused.
   */
  cap?: number | "stored";
  /** Only a counter of this generation may take the amount (the caller read it under a lock); any when unset. */
  generation?: number;
}

export type ReserveOutcome =
  | { kind: "reserved"; generation: number; before: number; after: number; limit: number | null }
  | { kind: "refused"; generation: number; value: number; limit: number | null }
  /** No counter, or not of the generation asked for: rebuild it from the database and ask again. */
  | { kind: "missing" };

/**
 * Hot usage counters shared by every instance (Redis) or kept by the one embedded instance (memory). They are
 * a cache of the database's usage records: each carries the generation it was rebuilt at, and a counter lost,
 * expired or replaced is rebuilt from the records (`load`) under a new generation.
 */
export interface UsageMeters {
  /** Adds (or raises to) `amount` in one atomic step unless that passes the cap. */
  reserve(request: ReserveRequest): Promise<ReserveOutcome>;
  /** Takes back a reserved amount that could not be recorded; a peak counter is dropped (rebuilt when next used). */
  release(key: MeterKey, generation: number, amount: number, mode: MeterMode): Promise<void>;
  /** The counter's generation; null when there is none. */
  generationOf(key: MeterKey): Promise<number | null>;
  /** Sets a counter rebuilt at `generation`, unless one of that generation or a newer one is there already. */
  load(key: MeterKey, generation: number, value: number, limit: number | null): Promise<void>;
}

/** Unused counters expire after this long; the next use rebuilds them. */
export const METER_IDLE_TTL_MS = 24 * 3600_000;
