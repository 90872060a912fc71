interface Waiting<Job, Result> {
  job: Job;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/** Turns a synchronous driver's group gathers jobs at most (see gatherTurns). */
export const SYNCHRONOUS_GATHER_TURNS = 4;

export interface GroupCommitOptions<Job> {
  /** A job's weight (its rows); a group holds jobs weighing `maxWeight` at most (a heavier job goes alone). */
  weigh: (job: Job) => number;
  maxWeight: number;
  /** Writes running at once; jobs arriving while that many run wait and are written together next. */
  maxInFlight: number;
  /**
   * Start a write a turn of the event loop after a job arrives, so that the jobs of every request read in that
   * turn share it, and another turn later while the last one brought jobs, up to this many turns. For a
   * synchronous driver (SQLite's): its write never yields to the event loop, so no job would ever arrive while
   * one runs, and each would be written alone. Under light load a job waits one turn.
   */
  gatherTurns?: number;
  /** Runs `next` at the end of the event loop's turn (setImmediate); tests step turns by hand. */
  endOfTurn?: (next: () => void) => void;
}

/**
 * Group commit: jobs submitted while every write slot is busy wait, and are then written together, in one call
 * of `write` (one transaction), so many requests share one commit. Under light load each job is written at
 * once by itself. `write` answers one result per job, in order; every job of a group that fails fails with its
 * error (nothing of it was stored).
 */
export class GroupCommit<Job, Result> {
  private waiting: Waiting<Job, Result>[] = [];
  private inFlight = 0;
  private gathering = false;

  constructor(
    private readonly write: (jobs: Job[]) => Promise<Result[]>,
    private readonly options: GroupCommitOptions<Job>,
  ) {}

  /** Resolves once every job submitted so far is written (or failed). */
  async drained(): Promise<void> {
    while (this.inFlight > 0 || this.waiting.length > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /** Whether no job waits or is being written. */
  idle(): boolean {
    return this.inFlight === 0 && this.waiting.length === 0;
  }

  /** Resolves once the job's group is committed. */
  submit(job: Job): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      if (!this.options.gatherTurns) this.startWrites();
      else if (!this.gathering) this.gather(this.options.gatherTurns);
    });
  }

  private gather(turnsLeft: number): void {
    this.gathering = true;
    const before = this.waiting.length;
    (this.options.endOfTurn ?? setImmediate)(() => {
      const more = this.waiting.length > before;
      if (more && turnsLeft > 1 && this.waitingWeight() < this.options.maxWeight) {
        this.gather(turnsLeft - 1);
        return;
      }
      this.gathering = false;
      this.startWrites();
    });
  }

  private waitingWeight(): number {
    let weight = 0;
    for (const waiting of this.waiting) weight += this.options.weigh(waiting.job);
    return weight;
  }

  private startWrites(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) void this.writeGroup(this.nextGroup());
  }

  private async writeGroup(group: Waiting<Job, Result>[]): Promise<void> {
    this.inFlight++;
    try {
      const results = await this.write(group.map((waiting) => waiting.job));
      for (const [index, waiting] of group.entries()) waiting.resolve(results[index]);
    } catch (error) {
      for (const waiting of group) waiting.reject(error);
    } finally {
      this.inFlight--;
      this.startWrites();
    }
  }

  private nextGroup(): Waiting<Job, Result>[] {
    const { weigh, maxWeight } = this.options;
    let count = 1;
    let weight = weigh(this.waiting[0].job);
    while (count < this.waiting.length) {
      weight += weigh(this.waiting[count].job);
      if (weight > maxWeight) break;
      count++;
    }
    return this.waiting.splice(0, count);
  }
}
