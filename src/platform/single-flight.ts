/**
 * Calls for one key made while an earlier one is under way share its result (or its failure) instead of doing the
 * same work again; a call after it settled starts anew.
 */
export class SingleFlight<V> {
  private readonly running = new Map<string, Promise<V>>();

  run(key: string, work: () => Promise<V>): Promise<V> {
    let running = this.running.get(key);
    if (!running) {
      running = work().finally(() => this.running.delete(key));
      this.running.set(key, running);
    }
    return running;
  }
}
