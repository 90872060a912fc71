import { isDatabaseBusy } from "../platform/database.js";
import { KeyedTurns } from "../platform/keyed-turns.js";
import { Semaphore } from "../platform/semaphore.js";
import type { BatchedTransactionOptions } from "../platform/statement-batch.js";

/** Transactions of one entitlement at once on an instance, and those of all entitlements waiting for a held row. */
const TURNS = { each: 2, waitingOverall: 4 };
/** A first attempt's wait for each lock: another activation, release or group holds a row for milliseconds. */
const FIRST_LOCK_WAIT: BatchedTransactionOptions = { lockWaitSeconds: 1 };

/**
 * Transactions that lock one entitlement's row outside activation groups (an activation decided alone, a release,
 * EndSession): two at a time per entitlement on an instance, the rest waiting in memory. Each runs first waiting at
 * most a second for each lock (`lockWait`); when a lock stays held longer, it runs again waiting the server's
 * lock-wait timeout, four at a time across all entitlements. So rows held elsewhere (a stalled instance's, an
 * operator's open session) take four of the pool's connections at most, and the transactions of entitlements not
 * held wait behind theirs only once their own lock has kept them a second.
 */
export class EntitlementTurns {
  private readonly each = new KeyedTurns(TURNS.each);
  private readonly waiting = new Semaphore(TURNS.waitingOverall);

  run<T>(entitlementId: string, work: (lockWait: BatchedTransactionOptions) => Promise<T>): Promise<T> {
    return this.each.run(entitlementId, async () => {
      try {
        return await work(FIRST_LOCK_WAIT);
      } catch (error) {
        if (!isDatabaseBusy(error)) throw error;
      }
      return this.waiting.run(() => work({}));
    });
  }
}
