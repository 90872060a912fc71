import type { Clock } from "../../src/platform/clock.js";

/** A clock that reads `start` until a test moves it. */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  /** Milliseconds since `start`. */
  readonly elapsedMs: number;
}

export function manualClock(start = Date.parse("2026-03-01T12:00:00Z")): ManualClock {
  let now = start;
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
    get elapsedMs() {
      return now - start;
    },
  };
}

/** A clock that moves one second on every reading, so every write gets a later timestamp. */
export function steppingClock(start = Date.parse("2026-01-01T00:00:00Z")): Clock {
  let now = start;
  return {
    now: () => {
      now += 1000;
      return new Date(now);
    },
  };
}
