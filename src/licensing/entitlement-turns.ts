/** Transactions that lock one entitlement's row, run at once by one instance; the rest wait in memory. */
const TURNS_AT_ONCE = 2;

interface Turns {
  running: number;
  waiting: (() => void)[];
}

/**
 * Each entitlement's transactions that wait on its row lock one at a time anyway (an activation run alone, a
 * release, EndSession): on this instance at most two run at once, so that a lock held elsewhere (a stalled
 * instance, an operator's open session) takes two of the pool's connections, not all of them, while its
 * requests wait.
 */
export class EntitlementTurns {
  private readonly byEntitlement = new Map<string, Turns>();

  async run<T>(entitlementId: string, work: () => Promise<T>): Promise<T> {
    await this.turn(entitlementId);
    try {
      return await work();
    } finally {
      this.done(entitlementId);
    }
  }

  private turn(entitlementId: string): Promise<void> {
    const turns = this.byEntitlement.get(entitlementId) ?? { running: 0, waiting: [] };
    this.byEntitlement.set(entitlementId, turns);
    if (turns.running < TURNS_AT_ONCE) {
      turns.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => turns.waiting.push(resolve));
  }

  /** Hands the turn to the next waiting, or frees it. */
  private done(entitlementId: string): void {
    const turns = this.byEntitlement.get(entitlementId);
    if (!turns) return;
    const next = turns.waiting.shift();
    if (next) next();
    else if (--turns.running === 0) this.byEntitlement.delete(entitlementId);
  }
}
