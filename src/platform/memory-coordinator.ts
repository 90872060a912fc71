import type { Clock } from "./clock.js";
import { systemClock } from "./clock.js";
import type { Coordinator, RateDecision } from "./coordinator.js";

export class MemoryCoordinator implements Coordinator {
  readonly kind = "memory" as const;
  private readonly windows = new Map<string, { count: number; endsAt: number }>();

  constructor(private readonly clock: Clock = systemClock) {}

  async ping(): Promise<void> {}

  async hit(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    const now = this.clock.now().getTime();
    let window = this.windows.get(key);
    if (!window || window.endsAt <= now) {
      this.dropEndedWindows(now);
      window = { count: 0, endsAt: now + windowMs };
      this.windows.set(key, window);
    }
    window.count++;
    return { allowed: window.count <= limit, count: window.count, retryAfterMs: window.endsAt - now };
  }

  async peek(key: string): Promise<{ count: number; retryAfterMs: number }> {
    const now = this.clock.now().getTime();
    const window = this.windows.get(key);
    return window && window.endsAt > now
      ? { count: window.count, retryAfterMs: window.endsAt - now }
      : { count: 0, retryAfterMs: 0 };
  }

  async close(): Promise<void> {
    this.windows.clear();
  }

  private dropEndedWindows(now: number): void {
    for (const [key, window] of this.windows) if (window.endsAt <= now) this.windows.delete(key);
  }
}
