import { accessToken } from "../test/support/auth.js";
import { meteredEntitlement, meteredSession, preallocatePath } from "../test/support/metering.js";
import type { LicensedSession } from "../test/support/observability.js";
import { defaultAuthorization } from "../test/support/rest.js";
import type { SessionTarget } from "./licensing-fixture.js";

export const METRIC = "api-calls";
/** Usage items per POST, as the issue asks (the service takes up to 1,000). */
export const BATCH = 500;
/** Customers the sessions belong to, each with its own counter and period row. */
export const ENTITLEMENTS = 8;
export const SESSIONS_PER_ENTITLEMENT = 8;

/** Metered API calls with a single Allow tier and no Block tier: nothing the bench sends is refused. */
const UNCAPPED_CALLS = {
  metricName: METRIC,
  name: "API calls",
  unit: "call",
  metricType: 1,
  meteredUsage: {
    consumptionPeriod: "P1M",
    usageTiers: [{ name: "Included", startUsage: 0, endUsage: 0, quotaUsageLevel: 1, quotaUsagePolicy: 1 }],
  },
};

/** Leases that outlast the run. */
const LONG_LEASE = { leaseTime: "1.00:00:00", gracePeriod: "01:00:00", allowOffLineUse: true };

/**
 * `ENTITLEMENTS` entitlements to a product metering `METRIC`, each activated `SESSIONS_PER_ENTITLEMENT` times from
 * distinct devices: the sessions, entitlement after entitlement.
 */
export async function seedUsage(
  baseUrl: string,
  admin: { clientId: string; clientSecret: string },
): Promise<LicensedSession[]> {
  defaultAuthorization.set(baseUrl, `Bearer ${await accessToken(baseUrl, admin.clientId, admin.clientSecret)}`);
  const sessions: LicensedSession[] = [];
  for (let customer = 0; customer < ENTITLEMENTS; customer++) {
    const entitlement = await meteredEntitlement(baseUrl, [UNCAPPED_CALLS], LONG_LEASE);
    for (let device = 0; device < SESSIONS_PER_ENTITLEMENT; device++) {
      sessions.push(await meteredSession(baseUrl, entitlement, `bench-usage-${customer}-${device}`));
    }
  }
  return sessions;
}

/** Pre-allocation answers checked, and those that did not grant it. */
export interface GrantTally {
  checked: number;
  refused: number;
}

/** Pre-allocation of 1 call, each connection going round the sessions (requests built once, as for check-in). */
export function preallocateTarget(sessions: LicensedSession[]): { target: SessionTarget; tally: GrantTally } {
  const tally: GrantTally = { checked: 0, refused: 0 };
  const parts = sessions.map(({ sessionId, authorization }) => ({
    path: preallocatePath(sessionId, METRIC, 1),
    headers: { authorization },
  }));
  const target: SessionTarget = {
    name: `pre-allocation of 1 (${sessions.length} sessions, in turn)`,
    method: "POST",
    ...parts[0],
    paths: parts.map((part) => part.path),
    variants: parts,
    onResponse: (status, body) => {
      if (status !== 200) return;
      tally.checked++;
      if (!body.includes('"granted":true')) tally.refused++;
    },
  };
  return { target, tally };
}
