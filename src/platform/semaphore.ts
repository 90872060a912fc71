/** Work run at most `atOnce` at a time; the rest waits in memory, in arrival order. */
export class Semaphore {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly atOnce: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.turn();
    try {
      return await work();
    } finally {
      this.done();
    }
  }

  private turn(): Promise<void> {
    if (this.running < this.atOnce) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Hands the turn to the next waiting, or frees it. */
  private done(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
