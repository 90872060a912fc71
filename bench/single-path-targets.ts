import { seedCatalog } from "./catalog-fixture.js";
import type { HttpTarget } from "./http-load.js";
import { licensingTargets, onEverySession, seedLicensing } from "./licensing-fixture.js";
import type { RunningProvision } from "./provision-server.js";
import { recordHttp } from "./replies.js";
import { preallocateTarget, seedUsage } from "./usage-fixture.js";

export const SINGLE_PATHS = ["checkIn", "healthz", "preallocate"] as const;
const HEALTHZ = { name: "/healthz", method: "GET" as const, path: "/healthz", headers: {}, paths: ["/healthz"] };

/**
 * One path measured alone against the bare server: `checkIn`, `healthz` or `preallocate`. Seeds what the path
 * needs and records the service's answers for the bare server to replay.
 */
export function singlePathOf(pathName: string) {
  if (!(SINGLE_PATHS as readonly string[]).includes(pathName)) {
    throw new Error(`unknown path ${pathName}: ${SINGLE_PATHS.join(", ")}`);
  }
  return async (provision: RunningProvision) => {
    let target: HttpTarget & { paths: string[] } = HEALTHZ;
    if (pathName === "checkIn") {
      const fixture = await seedCatalog(provision.baseUrl, provision.admin);
      const seeded = await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId);
      target = licensingTargets(seeded).checkIn;
    } else if (pathName === "preallocate") {
      target = preallocateTarget(await seedUsage(provision.baseUrl, provision.admin)).target;
    }
    const healthz = await recordHttp(provision.baseUrl, HEALTHZ);
    return {
      target,
      replies: { "GET /healthz": healthz, ...onEverySession(target, await recordHttp(provision.baseUrl, target)) },
    };
  };
}
