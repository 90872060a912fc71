import { setNewest } from "../platform/bounded-map.js";
import type { Statement } from "../platform/statement-batch.js";
import type { SeatRequest } from "./seat-allocation.js";

/** What a code's activation reads for its seat, besides the device: the policy's seats and the code's limits. */
export interface SeatPlan {
  claim: SeatRequest["claim"];
  code: SeatRequest["code"];
  /** Whether the policy's time runs from the entitlement's first activation (read with the locked rows). */
  readsFirstActivation: boolean;
}

const PLANS_KEPT = 10_000;

/**
 * The seat plan each code's last activation on this instance found under its locks. The next activation with
 * the code sends that plan's seat reads with its locking reads, in one round trip instead of two, and keeps
 * their results only if the rows it locked call for the same reads (see `seatResults` in activation.ts).
 */
export class SeatPlans {
  private readonly byCodeKey = new Map<string, SeatPlan>();

  get(codeKey: string): SeatPlan | undefined {
    return this.byCodeKey.get(codeKey);
  }

  remember(codeKey: string, plan: SeatPlan): void {
    const kept: SeatPlan = {
      claim: plan.claim && { isFloatingLicense: plan.claim.isFloatingLicense, numberOfSeats: plan.claim.numberOfSeats },
      code: {
        id: plan.code.id,
        maxDeviceActivations: plan.code.maxDeviceActivations,
        useEntitlementMaxActivations: plan.code.useEntitlementMaxActivations,
      },
      readsFirstActivation: plan.readsFirstActivation,
    };
    setNewest(this.byCodeKey, codeKey, kept, PLANS_KEPT);
  }
}

/** Whether two batches of statements are the same SQL with the same values. */
export function sameStatements(a: Statement[], b: Statement[]): boolean {
  return a.length === b.length && a.every((statement, i) => sameStatement(statement, b[i]));
}

function sameStatement(a: Statement, b: Statement): boolean {
  if (a.sql !== b.sql || a.parameters.length !== b.parameters.length) return false;
  return a.parameters.every((value, i) => sameValue(value, b.parameters[i]));
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return a === b;
}
