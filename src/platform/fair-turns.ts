/**
 * Work run at most `atOnce` at a time; what waits is served one key at a time in turn (round robin, each key's
 * own work in arrival order), so that one key's burst holds up another key's work by at most one turn of each.
 */
export class FairTurns {
  private running = 0;
  /** Waiting work by key, in the order keys are to be served next. */
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(private readonly atOnce: number) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    await this.turn(key);
    try {
      return await work();
    } finally {
      this.done();
    }
  }

  private turn(key: string): Promise<void> {
    if (this.running < this.atOnce) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(key);
      if (queue) queue.push(resolve);
      else this.waiting.set(key, [resolve]);
    });
  }

  /** Hands the turn to the next key's oldest work (that key then goes to the back), or frees it. */
  private done(): void {
    const next = this.waiting.entries().next();
    if (next.done) {
      this.running--;
      return;
    }
    const [key, queue] = next.value;
    const resolve = queue.shift() as () => void;
    this.waiting.delete(key);
    if (queue.length > 0) this.waiting.set(key, queue);
    resolve();
  }
}
