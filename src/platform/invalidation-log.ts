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
/** A poll reads the log in pages of this many rows, each after the last row of the one before. */
export const ROWS_PER_PAGE = 1000;

type Listener = { channel: string; onMessage: (message: string) => void };
interface LogRow {
  id: string | number | null;
  channel: string;
  message: string;
  created_at: Date;
}
/** Where a page starts: after this row, in (created_at, id) order. */
interface Cursor {
  at: Date;
  id: number;
}

/**
 * Publishes on `bus`; when it cannot (or there is no bus: Redis was unreachable), writes the invalidation to the
 * log instead, for the instances of a MySQL + Redis deployment to read within a second. Fails with the bus's
 * error only when the log could not be written either.
 */
export async function publishOrLog(
  bus: InvalidationBus | undefined,
  dataSource: DataSource,
  channel: string,
  message: string,
): Promise<void> {
  try {
    if (!bus) throw new Error("no Redis to publish on (REDIS_URL unset or unreachable)");
    await bus.publish(channel, message);
  } catch (error) {
    await dataSource
      .query("INSERT INTO cache_invalidations (channel, message, created_at) VALUES (?, ?, UTC_TIMESTAMP(3))", [
        channel,
        message,
      ])
      .catch(() => Promise.reject(error));
  }
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
  private polling: Promise<void> | undefined;
  /** The message of the last failed poll, warned of once until a poll succeeds or fails otherwise. */
  private failure: string | undefined;

  constructor(
    private readonly inner: InvalidationBus,
    private readonly dataSource: DataSource,
    private readonly logger: Logger,
  ) {}

  get listening(): boolean {
    return this.inner.listening;
  }

  publish(channel: string, message: string): Promise<void> {
    return publishOrLog(this.inner, this.dataSource, channel, message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void> {
    this.listeners.push({ channel, onMessage });
    await this.inner.subscribe(channel, onMessage, onReset);
  }

  /** Reads the log from now on (once the migrations made it). */
  async start(): Promise<void> {
    const [{ now }] = (await this.dataSource.query("SELECT UTC_TIMESTAMP(3) AS now")) as { now: Date }[];
    this.since = now;
    this.timer = setInterval(() => {
      this.polling ??= this.poll().finally(() => {
        this.polling = undefined;
      });
    }, POLL_MS);
    this.timer.unref();
  }

  /** Stops reading, after the read under way (which may still deliver), and closes the bus beneath. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.polling;
    await this.inner.close();
  }

  private async poll(): Promise<void> {
    if (!this.since) return;
    try {
      const now = await this.readFrom({ at: new Date(this.since.getTime() - OVERLAP_MS), id: 0 });
      this.since = now;
      if (this.failure !== undefined) this.logger.info("reading the invalidation log again");
      this.failure = undefined;
      if (++this.polls % PRUNE_EVERY_POLLS === 0) await this.prune();
    } catch (error) {
      const message = (error as Error).message;
      if (message !== this.failure) this.logger.warn({ err: { message } }, "could not read the invalidation log");
      this.failure = message;
    }
  }

  /**
   * Delivers every row after `cursor`, page by page; answers the database's time when the first page was read
   * (the next poll reads from there, less the overlap), so the window follows its clock, not ours.
   */
  private async readFrom(cursor: Cursor): Promise<Date> {
    let now: Date | undefined;
    for (let page = cursor; this.timer; ) {
      const rows = (await this.dataSource.query(
        "(SELECT id, channel, message, created_at FROM cache_invalidations " +
          "WHERE created_at > ? OR (created_at = ? AND id > ?) ORDER BY created_at, id LIMIT ?) " +
          "UNION ALL (SELECT NULL, NULL, NULL, UTC_TIMESTAMP(3))",
        [page.at, page.at, page.id, ROWS_PER_PAGE],
      )) as LogRow[];
      now ??= rows.find((row) => row.id === null)?.created_at;
      const logged = rows.filter((row) => row.id !== null);
      this.deliver(logged);
      if (logged.length < ROWS_PER_PAGE) break;
      const last = logged[logged.length - 1];
      page = { at: last.created_at, id: Number(last.id) };
    }
    return now ?? (this.since as Date);
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
      `DELETE FROM cache_invalidations WHERE created_at < UTC_TIMESTAMP(3) - INTERVAL ${KEPT_MINUTES} MINUTE LIMIT 1000`,
    );
  }
}
