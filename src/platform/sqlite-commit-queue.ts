import type { DataSource, QueryRunner } from "typeorm";

/** Writes sharing one commit at most; the ones queued behind them start the next. */
const WRITES_PER_COMMIT = 64;

/** How a job uses the embedded database. */
export interface SqliteJobKind {
  write: boolean;
  /** A write that gathered a group of its own (see GroupCommit): committed once done, not at the end of the turn. */
  gathered?: boolean;
}

interface Job extends SqliteJobKind {
  work: () => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The part of TypeORM's SQLite query runner whose transaction state is reset after SQLite dropped a transaction. */
interface RunnerState {
  transactionDepth: number;
  isTransactionActive: boolean;
}

/**
 * The embedded database's one connection, used by one job at a time (TypeORM gives every transaction of a
 * better-sqlite3 data source the same connection). Writes queued behind one another share one SQLite transaction
 * and so one flush to disk: each runs in a savepoint of its own (a failed write is undone alone, and its caller
 * answered at once), and each is answered only once the shared COMMIT is durable; if that COMMIT fails, every write
 * in it fails. Reads run in the same queue, at once, and see what the writes before them wrote, as a MySQL reader
 * sees a commit before its log flush completes.
 */
export class SqliteCommitQueue {
  private readonly jobs: Job[] = [];
  private draining = false;
  private commitScheduled = false;
  /** Writes done in the open SQLite transaction, answered when it commits. */
  private done: { job: Job; value: unknown }[] = [];

  constructor(private readonly dataSource: DataSource) {}

  run<T>(work: () => Promise<T>, kind: SqliteJobKind): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.jobs.push({ ...kind, work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      for (let job = this.jobs.shift(); job; job = this.jobs.shift()) {
        await (job.write ? this.runWrite(job) : this.runRead(job));
        const gatheredDone = job.gathered && this.done.at(-1)?.job === job;
        if (gatheredDone || this.done.length >= WRITES_PER_COMMIT) await this.commit();
      }
    } finally {
      this.draining = false;
    }
    this.commitAtEndOfTurn();
  }

  /**
   * Commits once this turn of the event loop has run its callbacks: the requests read in the same turn queue
   * their writes meanwhile (a request served from memory and SQLite alone runs to its answer without yielding,
   * so no write would ever wait behind another).
   */
  private commitAtEndOfTurn(): void {
    if (this.commitScheduled || !this.runner().isTransactionActive) return;
    this.commitScheduled = true;
    setImmediate(() => {
      this.commitScheduled = false;
      if (!this.draining) void this.commitNow();
    });
  }

  private async commitNow(): Promise<void> {
    if (!this.runner().isTransactionActive) return;
    this.draining = true;
    try {
      await this.commit();
    } finally {
      this.draining = false;
    }
    if (this.jobs.length > 0) void this.drain();
  }

  private async runRead(job: Job): Promise<void> {
    try {
      job.resolve(await job.work());
    } catch (error) {
      job.reject(error);
    }
  }

  private async runWrite(job: Job): Promise<void> {
    const runner = this.runner();
    try {
      if (!runner.isTransactionActive) await runner.startTransaction();
      await runner.startTransaction();
    } catch (error) {
      job.reject(error);
      return;
    }
    try {
      const value = await job.work();
      await runner.commitTransaction();
      this.done.push({ job, value });
    } catch (error) {
      await runner.rollbackTransaction().catch(() => undefined);
      job.reject(error);
      if (!this.inTransaction()) this.transactionLost(error);
    }
  }

  /** Commits the shared transaction, then answers the writes done in it (no job runs meanwhile). */
  private async commit(): Promise<void> {
    try {
      await this.runner().commitTransaction();
    } catch (error) {
      await this.runner()
        .rollbackTransaction()
        .catch(() => undefined);
      this.transactionLost(error);
      return;
    }
    const done = this.done;
    this.done = [];
    for (const { job, value } of done) job.resolve(value);
  }

  /** The shared transaction did not commit (an I/O error, a full disk): the writes done in it are lost. */
  private transactionLost(cause: unknown): void {
    this.resetRunner();
    const lost = this.done;
    this.done = [];
    for (const { job } of lost) job.reject(cause);
  }

  private runner(): QueryRunner {
    return this.dataSource.createQueryRunner();
  }

  private inTransaction(): boolean {
    const driver = this.dataSource.driver as unknown as { databaseConnection?: { inTransaction: boolean } };
    return driver.databaseConnection?.inTransaction ?? false;
  }

  private resetRunner(): void {
    const state = this.runner() as unknown as RunnerState;
    state.transactionDepth = 0;
    state.isTransactionActive = false;
  }
}
