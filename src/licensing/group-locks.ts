import type { GroupLocking } from "./group-activation.js";

/**
 * How long a group waits for an entitlement the group before it holds: that group commits within milliseconds,
 * unless the lock went to a transaction that queued for it earlier (another instance's, an operator's).
 */
const GROUP_LOCK_WAIT_SECONDS = 1;

/** One group's locking, and what it calls when its transaction has ended. */
export interface GroupTurn {
  locking: GroupLocking;
  release(): void;
}

/**
 * The entitlements this instance's groups hold, handed from each group to the next: a group takes its locks once
 * the group before it holds its own, and waits only for those that group holds (it commits next, soon); any other
 * entitlement another transaction holds, it passes over.
 */
export class GroupLocks {
  private readonly held = new Map<string, number>();
  private lastTaken: Promise<void> = Promise.resolve();

  /** The next group's turn, once the group before it holds its locks (or has ended). */
  async next(): Promise<GroupTurn> {
    const before = this.lastTaken;
    let taken = () => {};
    this.lastTaken = new Promise((resolve) => {
      taken = resolve;
    });
    await before;
    let holding: string[] = [];
    const hold = (entitlementIds: string[]) => {
      this.count(holding, -1);
      holding = entitlementIds;
      this.count(holding, 1);
      taken();
    };
    // A group run again (after a deadlock) does not wait for the rows its rolled-back run held.
    const heldByOthers = (id: string) => (this.held.get(id) ?? 0) > (holding.includes(id) ? 1 : 0);
    const locking = { waitsFor: heldByOthers, locked: hold, waitSeconds: GROUP_LOCK_WAIT_SECONDS };
    return { locking, release: () => hold([]) };
  }

  private count(entitlementIds: string[], by: 1 | -1): void {
    for (const id of entitlementIds) {
      const count = (this.held.get(id) ?? 0) + by;
      if (count > 0) this.held.set(id, count);
      else this.held.delete(id);
    }
  }
}
