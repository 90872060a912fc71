import { driveHttp, type HttpTarget, type LoadFigures, type LoadOptions } from "./http-load.js";
import type { licensingTargets } from "./licensing-fixture.js";
import { drivePaced } from "./paced-load.js";
import type { Mode } from "./provision-server.js";
import { type PathResult, pathResult } from "./report.js";

type Drive = (baseUrl: string, target: HttpTarget) => Promise<LoadFigures>;

/**
 * Check-in at full speed and again paced at half that rate (its p99 then is the goal), renew, then activation
 * of one entitlement and spread over several, each against the bare server replaying its reply at the same load.
 */
export async function licensingRows(
  mode: Mode,
  urls: { provision: string; bare: string },
  targets: ReturnType<typeof licensingTargets>,
  load: LoadOptions,
): Promise<PathResult[]> {
  const rows: PathResult[] = [];
  const flatOut: Drive = (baseUrl, target) => driveHttp(baseUrl, target, load);
  const compare = async (target: HttpTarget, goal?: string, drive = flatOut, name = target.name) => {
    console.error(`[${mode}] ${name}`);
    const measured = await drive(urls.provision, target);
    rows.push(pathResult(name, measured, await drive(urls.bare, target), "bare", goal));
    return measured;
  };
  const checkIn = await compare(targets.checkIn, "≥ 0.5× bare");
  const rate = Math.max(1, Math.round(checkIn.requestsPerSecond / 2));
  const halfLoad: Drive = (baseUrl, target) => drivePaced(baseUrl, target, { ...load, rate });
  await compare(targets.checkIn, "p99 ≤ 10 ms at ½ load", halfLoad, `check-in at ½ load, paced (${rate}/s)`);
  await compare(targets.renew);
  const activationGoal = mode === "mysql" ? "≥ 1,500/s" : undefined;
  await compare(targets.activate, activationGoal);
  await compare(targets.activateCustomers, activationGoal);
  return rows;
}
