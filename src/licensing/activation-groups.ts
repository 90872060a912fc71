import { databaseBusy, isDatabaseBusy } from "../platform/database.js";
import { GroupCommit } from "../platform/group-commit.js";
import { Lanes } from "../platform/lanes.js";
import type { Activated, ActivationDependencies } from "./activation.js";
import { codeNotFound } from "./activation-steps.js";
import {
  activateGroup,
  GroupCommitInDoubt,
  type GroupedActivation,
  type GroupLocking,
  type GroupOutcome,
  LocksNotGranted,
  passingOverEvery,
  WAITING_FOR_EVERY_LOCK,
} from "./group-activation.js";
import { GroupLocks } from "./group-locks.js";
import type { SeatPlan } from "./seat-plans.js";

/** Activations one group takes at most: its statements grow with it (one row each in a few multi-row writes). */
const GROUP_SIZE = 64;
/**
 * Groups sent at once: a group that shares an entitlement with the one before it waits on that row's lock in the
 * database and takes it as the first commits, with no round trip to the service between them.
 */
const GROUPS_IN_FLIGHT = 2;
/** Lanes writing at once on an instance, whatever the number of entitlements held elsewhere (see ActivationGroups). */
const LANES_AT_ONCE = 2;

type Groups = GroupCommit<GroupedActivation, GroupOutcome>;

/**
 * Activations arriving while two groups are being written are written together next, in one transaction
 * (`activateGroup`), whichever entitlements they activate: an entitlement a whole fleet activates at once takes
 * as many activations a second as the database writes groups, not transactions, and so do many entitlements
 * activated at once: a group's statements are one for each kind of row whatever the number of entitlements
 * (once this instance keeps their products and features).
 * Under light load each activation is a group of one.
 *
 * An entitlement another transaction holds (see GroupLocks) gets a lane of its own while it has activations
 * waiting: its groups, one at a time, wait for its lock on one connection, and the other entitlements' groups go on.
 * However many entitlements are held elsewhere, their lanes wait on two connections in all.
 */
export class ActivationGroups {
  private groups: Groups | undefined;
  private lanes: Lanes<GroupedActivation, GroupOutcome> | undefined;
  private readonly locks = new GroupLocks();
  /**
   * When a lane's group last answered 503 after waiting out its entitlement's lock, by entitlement, while that
   * entitlement's lane lives: only the activations queued in the lane then are answered by it.
   */
  private readonly busySince = new Map<string, number>();
  /** The most entitlements one group has activated on this instance. */
  widest = 0;

  async submit(deps: ActivationDependencies, job: GroupedActivation): Promise<GroupOutcome> {
    this.groups ??= new GroupCommit((jobs) => this.write(deps, jobs), { ...GROUPS, maxInFlight: GROUPS_IN_FLIGHT });
    this.lanes ??= new Lanes((jobs) => this.writeLane(deps, jobs), GROUPS, LANES_AT_ONCE);
    const { lanes } = this;
    const { entitlementId } = job.owner;
    if (lanes.has(entitlementId)) return this.inLane(lanes, entitlementId, job);
    const outcome = await this.groups.submit(job);
    return outcome.kind === "blocked" ? this.inLane(lanes, entitlementId, job) : outcome;
  }

  /** Entitlements whose lane's last group answered 503: none once their lanes have emptied. */
  get refusedBusy(): number {
    return this.busySince.size;
  }

  private async inLane(lanes: Lanes<GroupedActivation, GroupOutcome>, entitlementId: string, job: GroupedActivation) {
    try {
      return await lanes.submit(entitlementId, job);
    } finally {
      if (!lanes.has(entitlementId)) this.busySince.delete(entitlementId);
    }
  }

  /**
   * A lane's group. Once one waited out the lock-wait timeout (503), the activations that queued behind it since
   * answer that too, at once, rather than each group after it waiting the whole timeout again; those that came
   * after the refusal wait for the lock afresh.
   */
  private async writeLane(deps: ActivationDependencies, jobs: GroupedActivation[]): Promise<GroupOutcome[]> {
    const { entitlementId } = jobs[0].owner;
    const refusedAt = this.busySince.get(entitlementId) ?? Number.NEGATIVE_INFINITY;
    const waitedOut = (job: GroupedActivation) => job.now.getTime() <= refusedAt;
    const fresh = jobs.filter((job) => !waitedOut(job));
    const written = fresh.length > 0 ? await activateOrAnswer(deps, fresh, WAITING_FOR_EVERY_LOCK) : [];
    const busy = written.some((outcome) => outcome.kind === "refused" && isDatabaseBusy(outcome.error));
    if (busy) this.busySince.set(entitlementId, deps.clock.now().getTime());
    else if (fresh.length > 0) this.busySince.delete(entitlementId);
    const outcomes = new Map(fresh.map((job, index) => [job, written[index]]));
    return jobs.map((job) => outcomes.get(job) ?? { kind: "refused", error: databaseBusy() });
  }

  private async write(deps: ActivationDependencies, jobs: GroupedActivation[]): Promise<GroupOutcome[]> {
    this.widest = Math.max(this.widest, new Set(jobs.map((job) => job.owner.entitlementId)).size);
    const turn = await this.locks.next();
    try {
      return await activateOrAnswer(deps, jobs, turn.locking);
    } finally {
      turn.release();
    }
  }
}

const GROUPS = { weigh: () => 1, maxWeight: GROUP_SIZE };

/**
 * A group that fails as a whole (rolled back) sends each of its activations alone, so that one entitlement's
 * trouble answers its own activations only, not those of every entitlement grouped with it (alone, each waits its
 * entitlement's turn: see EntitlementTurns); but a lane's group whose lock stayed held through its wait answers
 * that (503) to each, rather than each waiting for it again alone. A group not granted in time a lock it waited for
 * (another transaction took it first) runs again passing over every lock held, so that the group and every group
 * after it on this instance do not wait on that transaction. A group whose connection was lost during its COMMIT
 * answers as it committed, or, when it did not, alone (see settledInDoubt).
 */
async function activateOrAnswer(
  deps: ActivationDependencies,
  jobs: GroupedActivation[],
  locking: GroupLocking,
): Promise<GroupOutcome[]> {
  const inLane = locking === WAITING_FOR_EVERY_LOCK;
  try {
    return await activateGroup(deps, jobs, locking);
  } catch (error) {
    // A lane waits the server's whole lock-wait timeout: its lock not granted is the database busy, as below.
    if (error instanceof LocksNotGranted && inLane) return jobs.map(() => ({ kind: "refused", error: databaseBusy() }));
    if (error instanceof LocksNotGranted) return activateOrAnswer(deps, jobs, passingOverEvery(locking));
    const settled = await settledInDoubt(error, jobs.length);
    if (settled) return settled;
    const outcome: GroupOutcome = inLane && isDatabaseBusy(error) ? { kind: "refused", error } : { kind: "alone" };
    return jobs.map(() => outcome);
  }
}

/**
 * A lost COMMIT's outcomes: the group's when it committed, undefined when it did not; when that cannot be told,
 * each activation answers the doubt (503 `outcome-unknown`) rather than activate again.
 */
async function settledInDoubt(error: unknown, count: number): Promise<GroupOutcome[] | undefined> {
  if (!(error instanceof GroupCommitInDoubt)) return undefined;
  try {
    return await error.settle();
  } catch {
    return Array.from({ length: count }, () => ({ kind: "refused", error: error.doubt }));
  }
}

/**
 * Whether the code's last activation on this instance found what a group takes (no time counted from the first
 * activation), and so what the group reads for its seat. The group checks again under its locks.
 */
export function groupable(plan: SeatPlan | undefined): plan is SeatPlan {
  return plan !== undefined && !plan.readsFirstActivation;
}

/** The activation in the next group; `alone` runs it by itself when the group cannot take it. */
export async function activateInGroup(
  deps: ActivationDependencies,
  job: Omit<GroupedActivation, "owner">,
  alone: () => Promise<Activated>,
): Promise<Activated> {
  const owner = await deps.store.entitlementOfCode(deps.dataSource.manager, job.key);
  if (!owner) throw codeNotFound();
  const outcome = await deps.activationGroups.submit(deps, { ...job, owner });
  if (outcome.kind === "refused") throw outcome.error;
  return outcome.kind === "activated" ? outcome.activated : alone();
}
