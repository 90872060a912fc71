import RateLimiterMemory from "rate-limiter-flexible/lib/RateLimiterMemory.js";
import { type Coordinator, limiterRegistry, type RateLimiter, type RateLimitOptions } from "./coordinator.js";
import { MemoryUsageMeters } from "./memory-usage-meters.js";

/** The coordinator of one embedded instance: everything in this process's memory. */
export class MemoryCoordinator implements Coordinator {
  readonly kind = "memory" as const;
  readonly meters = new MemoryUsageMeters();
  readonly rateLimiter: (options: RateLimitOptions) => RateLimiter = limiterRegistry(
    ({ name, points, durationSeconds }) =>
      new RateLimiterMemory({ keyPrefix: name, points, duration: durationSeconds }),
  );

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}
