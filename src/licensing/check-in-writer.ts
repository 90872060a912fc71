import type { Logger } from "../platform/logger.js";
import { loggedFailure } from "../platform/lost-connections.js";

/** Sessions per UPDATE statement. */
const CHUNK = 500;

/**
 * Check-ins are written behind: each instance keeps the latest check-in time per session in memory and writes
 * them every `intervalMs` in a few statements, so a check-in costs no database round trip and what a vendor
 * reads (ListSessions' lastCheckInAt) is at most about `intervalMs` old. A failed write is kept and retried with
 * the next; an instance that dies loses at most its last interval's times, which are liveness, not promises.
 */
export class CheckInWriter {
  private pending = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (checkIns: Map<string, Date>) => Promise<void>,
    private readonly logger: Logger,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  record(sessionId: string, at: Date): void {
    const known = this.pending.get(sessionId);
    if (!known || known < at) this.pending.set(sessionId, at);
  }

  /** Writes what is pending; one flush at a time. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.writePending());
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async writePending(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const entries = [...batch];
    for (let start = 0; start < entries.length; start += CHUNK) {
      const chunk = new Map(entries.slice(start, start + CHUNK));
      try {
        await this.write(chunk);
      } catch (error) {
        for (const [sessionId, at] of chunk) this.record(sessionId, at);
        this.logger.warn(
          { err: loggedFailure(error), sessions: chunk.size },
          "could not record check-ins; retrying with the next",
        );
      }
    }
  }
}
