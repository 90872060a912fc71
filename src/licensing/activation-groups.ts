import { setNewest } from "../platform/bounded-map.js";
import { GroupCommit } from "../platform/group-commit.js";
import type { Activated, ActivationDependencies } from "./activation.js";
import { codeNotFound } from "./activation-steps.js";
import { activateGroup, type GroupedActivation, type GroupOutcome, type GroupOwner } from "./group-activation.js";
import type { SeatPlan } from "./seat-plans.js";

/** Activations one group takes at most: its statements grow with it (one row each in a few multi-row writes). */
const GROUP_SIZE = 64;
/**
 * Groups of one entitlement sent at once: the second waits on the row lock in the database and takes it as the
 * first commits, with no round trip to the service between them.
 */
const GROUPS_IN_FLIGHT = 2;
const ENTITLEMENTS_KEPT = 10_000;

/**
 * Activations of one entitlement all wait for its row lock, one transaction after another. Those that arrive
 * while two of the entitlement's groups are being written are written together next, in one transaction
 * (`activateGroup`): an entitlement a whole fleet activates at once takes as many activations a second as
 * the database writes groups, not transactions. Under light load each activation is a group of one.
 */
export class ActivationGroups {
  private readonly byEntitlement = new Map<string, GroupCommit<GroupedActivation, GroupOutcome>>();

  submit(deps: ActivationDependencies, owner: GroupOwner, job: GroupedActivation): Promise<GroupOutcome> {
    let groups = this.byEntitlement.get(owner.entitlementId);
    if (!groups) {
      groups = new GroupCommit((jobs) => activateGroup(deps, owner, jobs), {
        weigh: () => 1,
        maxWeight: GROUP_SIZE,
        maxInFlight: GROUPS_IN_FLIGHT,
      });
      setNewest(this.byEntitlement, owner.entitlementId, groups, ENTITLEMENTS_KEPT);
    }
    return groups.submit(job);
  }
}

/**
 * Whether the code's last activation on this instance found what a group takes (no time counted from the first
 * activation), and so what the group reads for its seat. The group checks again under its locks.
 */
export function groupable(plan: SeatPlan | undefined): plan is SeatPlan {
  return plan !== undefined && !plan.readsFirstActivation;
}

/** The activation in its entitlement's next group; `alone` runs it by itself when the group cannot take it. */
export async function activateInGroup(
  deps: ActivationDependencies,
  job: GroupedActivation,
  alone: () => Promise<Activated>,
): Promise<Activated> {
  const owner = await deps.store.entitlementOfCode(deps.dataSource.manager, job.key);
  if (!owner) throw codeNotFound();
  const outcome = await deps.activationGroups.submit(deps, owner, job);
  if (outcome.kind === "refused") throw outcome.error;
  return outcome.kind === "activated" ? outcome.activated : alone();
}
