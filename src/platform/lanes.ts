import { GroupCommit, type GroupCommitOptions } from "./group-commit.js";
import { Semaphore } from "./semaphore.js";

/**
 * Group commits of their own for the keys (entitlements, periods) a shared group commit passed over: each key's
 * lane writes one group at a time, lives while it has jobs, and the lanes of all keys write `atOnce` at a time.
 */
export class Lanes<Job, Result> {
  private readonly byKey = new Map<string, GroupCommit<Job, Result>>();
  private readonly turns: Semaphore;

  constructor(
    private readonly write: (jobs: Job[]) => Promise<Result[]>,
    private readonly options: Omit<GroupCommitOptions<Job>, "maxInFlight">,
    atOnce: number,
  ) {
    this.turns = new Semaphore(atOnce);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  async submit(key: string, job: Job): Promise<Result> {
    const lane = this.byKey.get(key) ?? this.laneOf();
    this.byKey.set(key, lane);
    try {
      return await lane.submit(job);
    } finally {
      if (lane.idle() && this.byKey.get(key) === lane) this.byKey.delete(key);
    }
  }

  /** Resolves once no lane has a job. */
  async drained(): Promise<void> {
    while (this.byKey.size > 0) for (const lane of [...this.byKey.values()]) await lane.drained();
  }

  private laneOf(): GroupCommit<Job, Result> {
    return new GroupCommit((jobs) => this.turns.run(() => this.write(jobs)), {
      ...this.options,
      maxInFlight: 1,
    });
  }
}
