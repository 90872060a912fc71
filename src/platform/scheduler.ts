import type { DataSource } from "typeorm";
import type { Clock } from "./clock.js";
import type { Logger } from "./logger.js";
import { loggedFailure } from "./lost-connections.js";
import { SchedulerLease } from "./scheduler-lease.js";

/** The lease of the time-driven work. */
const SCHEDULER_LEASE = "provision-scheduler";
/** The lease outlives this many ticks, and at least 30 s, before another instance may take it over. */
const LEASE_TICKS = 3;

/** One piece of time-driven work; run again at every tick, so it must do only what is due (and be idempotent). */
export interface ScheduledJob {
  name: string;
  run(now: Date): Promise<void>;
}

/**
 * Runs the jobs at every tick on the one instance holding the lease (each instance tries; the others wait for
 * it to expire). A failing job is logged and tried again at the next tick; the others still run.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private held = false;

  constructor(
    private readonly options: {
      lease: SchedulerLease;
      jobs: ScheduledJob[];
      intervalMs: number;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs).unref();
    void this.tick();
  }

  /** One round: every job, the lease taken or renewed before each. Answers when done (tests call it directly). */
  tick(): Promise<void> {
    this.running ??= this.round().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
    if (this.held) await this.options.lease.release().catch(() => undefined);
  }

  /** Runs every job, the lease taken or renewed before each: a round that outlived it stops once another has it. */
  private async round(): Promise<void> {
    const { jobs, clock, logger } = this.options;
    for (const job of jobs) {
      if (!(await this.renewLease())) return;
      try {
        await job.run(clock.now());
      } catch (error) {
        logger.warn({ err: loggedFailure(error), job: job.name }, "scheduled job failed");
      }
    }
  }

  private async renewLease(): Promise<boolean> {
    try {
      this.held = await this.options.lease.acquire();
    } catch (error) {
      this.options.logger.warn({ err: loggedFailure(error) }, "could not take or renew the scheduler lease");
      this.held = false;
    }
    return this.held;
  }
}

/** The scheduler of this instance, with its lease in the database. */
export function createScheduler(options: {
  dataSource: DataSource;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
  jobs: ScheduledJob[];
}): Scheduler {
  const ttlMs = Math.max(LEASE_TICKS * options.intervalMs, 30_000);
  const lease = new SchedulerLease(options.dataSource, options.clock, SCHEDULER_LEASE, ttlMs);
  return new Scheduler({ ...options, lease });
}
