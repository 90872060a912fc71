interface Turns {
  running: number;
  waiting: (() => void)[];
}

/**
 * Work on one key (an entitlement, say) run at most `atOnce` at a time; the rest waits in memory, in arrival order.
 * Licensing runs each entitlement's transactions that wait on its row lock one at a time anyway (an activation run
 * alone, a release, EndSession) two at a time, so that a lock held elsewhere (a stalled instance, an operator's
 * open session) takes two of the pool's connections, not all of them, while its requests wait.
 */
export class KeyedTurns {
  private readonly byKey = new Map<string, Turns>();

  constructor(private readonly atOnce: number) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    await this.turn(key);
    try {
      return await work();
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
