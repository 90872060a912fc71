import { Semaphore } from "./semaphore.js";

interface Turns {
  running: number;
  waiting: (() => void)[];
}

/**
 * Work on one key (an entitlement, say) run at most `atOnce` at a time, and that of all keys at most `overall` at a
 * time; the rest waits in memory, in arrival order. Transactions waiting on a row another transaction holds (see
 * EntitlementTurns, and usage batches waiting on a held period) run in turns, so that they take a few of the
 * pool's connections, not all of them, while they wait.
 */
export class KeyedTurns {
  private readonly byKey = new Map<string, Turns>();
  private readonly overall: Semaphore | undefined;

  constructor(
    private readonly atOnce: number,
    overall?: number,
  ) {
    this.overall = overall === undefined ? undefined : new Semaphore(overall);
  }

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    await this.turn(key);
    try {
      return await (this.overall ? this.overall.run(work) : work());
    } finally {
      this.done(key);
    }
  }

  private turn(key: string): Promise<void> {
    const turns = this.byKey.get(key) ?? { running: 0, waiting: [] };
    this.byKey.set(key, turns);
    if (turns.running < this.atOnce) {
      turns.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => turns.waiting.push(resolve));
  }

  /** Hands the turn to the next waiting, or frees it. */
  private done(key: string): void {
    const turns = this.byKey.get(key);
    if (!turns) return;
    const next = turns.waiting.shift();
    if (next) next();
    else if (--turns.running === 0) this.byKey.delete(key);
  }
}
