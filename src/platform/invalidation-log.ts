import type { DataSource } from "typeorm";
import type { InvalidationBus } from "./invalidation-bus.js";
import type { Logger } from "./logger.js";

/** How often every instance reads the log. */
const POLL_MS = 1000;
/** Rows are read again this long after they were written: a row committed late (ids out of order) is not missed. */
const OVERLAP_MS = 5000;
/** Rows older than this are deleted, a few at a time, about once a minute. */
const KEPT_MINUTES = 10;
const PRUNE_EVERY_POLLS = 60;
const ROWS_PER_POLL = 1000;

type Listener = { channel: string; onMessage: (message: string) => void };
interface LogRow {
  id: string | number | null;
  channel: string;
  message: string;
  created_at: Date;
}

/** Writes an invalidation to the log, for the instances of a MySQL + Redis deployment to read within a second. */
export async function logInvalidation(dataSource: DataSource, channel: string, message: string): Promise<void> {
  await dataSource.query("INSERT INTO cache_invalidations (channel, message, created_at) VALUES (?, ?, NOW(3))", [
    channel,
    message,
  ]);
}

/**
 * A bus whose messages also go through MySQL when Redis cannot take them: an instance cut off from Redis (but
 * not from MySQL) still tells the others of the changes it commits, in about a second, instead of leaving their
 * cached copies to expire. Every instance reads the log (`cache_invalidations`) each second from `start()`.
 */
export class LoggedInvalidationBus implements InvalidationBus {
  private readonly listeners: Listener[] = [];
  private readonly seen = new Map<string, number>();
  private since: Date | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polls = 0;
  private polling = false;

  constructor(
    private readonly inner: InvalidationBus,
    private readonly dataSource: DataSource,
    private readonly logger: Logger,
  ) {}

  get listening(): boolean {
    return this.inner.listening;
  }

  async publish(channel: string, message: string): Promise<void> {
    try {
      await this.inner.publish(channel, message);
    } catch (error) {
      await logInvalidation(this.dataSource, channel, message).catch(() => Promise.reject(error));
    }
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void> {
    this.listeners.push({ channel, onMessage });
    await this.inner.subscribe(channel, onMessage, onReset);
  }

  /** Reads the log from now on (once the migrations made it). */
  async start(): Promise<void> {
    const [{ now }] = (await this.dataSource.query("SELECT NOW(3) AS now")) as { now: Date }[];
    this.since = now;
    this.timer = setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.inner.close();
  }

  private async poll(): Promise<void> {
    if (this.polling || !this.since) return;
    this.polling = true;
    try {
      // The database's own time comes along (the row with no id), so the window follows its clock, not ours.
      const rows = (await this.dataSource.query(
        "(SELECT id, channel, message, created_at FROM cache_invalidations WHERE created_at >= ? ORDER BY created_at, id LIMIT ?) UNION ALL (SELECT NULL, NULL, NULL, NOW(3))",
        [new Date(this.since.getTime() - OVERLAP_MS), ROWS_PER_POLL],
      )) as LogRow[];
      const logged = rows.filter((row) => row.id !== null);
      this.deliver(logged);
      const now = rows.find((row) => row.id === null)?.created_at;
      this.since = logged.length === ROWS_PER_POLL ? logged[logged.length - 1].created_at : (now ?? this.since);
      if (++this.polls % PRUNE_EVERY_POLLS === 0) await this.prune();
    } catch (error) {
      this.logger.warn({ err: { message: (error as Error).message } }, "could not read the invalidation log");
    } finally {
      this.polling = false;
    }
  }

  private deliver(rows: LogRow[]): void {
    const forgetBefore = (this.since?.getTime() ?? 0) - 2 * OVERLAP_MS;
    for (const [id, at] of this.seen) if (at < forgetBefore) this.seen.delete(id);
    for (const row of rows) {
      const id = String(row.id);
      if (this.seen.has(id)) continue;
      this.seen.set(id, row.created_at.getTime());
      for (const listener of this.listeners) if (listener.channel === row.channel) listener.onMessage(row.message);
    }
  }

  private async prune(): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM cache_invalidations WHERE created_at < NOW(3) - INTERVAL ${KEPT_MINUTES} MINUTE LIMIT 1000`,
    );
  }
}
