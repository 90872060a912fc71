import type { LoadFigures } from "./http-load.js";
import type { StartupFigures } from "./provision-server.js";

export interface PathResult {
  path: string;
  provision: LoadFigures;
  /**
   * The bare node:http (or node:http2) server answering the same bytes, raw INSERTs of the same rows, or the same
   * path on the same service before its provider had a webhook subscription.
   */
  baseline: LoadFigures;
  baselineKind: "bare" | "raw insert" | "no subscription";
  /** provision req/s ÷ baseline req/s. */
  ratio: number;
  goal?: string;
}

export interface ModeResult {
  mode: string;
  /** Absent when only some rows ran (BENCH_ONLY). */
  startup?: StartupFigures & { bareMedianMs: number; bareIdleRssMiB: number };
  paths: PathResult[];
}

export function pathResult(
  path: string,
  provision: LoadFigures,
  baseline: LoadFigures,
  baselineKind: PathResult["baselineKind"] = "bare",
  goal?: string,
): PathResult {
  const ratio = baseline.requestsPerSecond > 0 ? provision.requestsPerSecond / baseline.requestsPerSecond : 0;
  return { path, provision, baseline, baselineKind, ratio: Number(ratio.toFixed(3)), ...(goal ? { goal } : {}) };
}

/** A table per mode, for people; the JSON below it is for tools. */
export function printTable(result: ModeResult): void {
  const { startup } = result;
  const rows = [
    ["path", "req/s", "p50 ms", "p99 ms", "fail", "baseline req/s", "baseline p50", "ratio", "goal"],
    ...result.paths.map((row) => [
      row.path,
      String(row.provision.requestsPerSecond),
      String(row.provision.p50Ms),
      String(row.provision.p99Ms),
      String(row.provision.failures),
      `${row.baseline.requestsPerSecond} (${row.baselineKind})`,
      String(row.baseline.p50Ms),
      `${row.ratio}×`,
      row.goal ?? "",
    ]),
  ];
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  const line = (row: string[]) => row.map((cell, column) => cell.padEnd(widths[column])).join("  ");
  console.log(`\n== ${result.mode}`);
  if (startup) printStartup(startup);
  console.log(line(rows[0]));
  console.log(widths.map((width) => "-".repeat(width)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
}

function printStartup(startup: NonNullable<ModeResult["startup"]>): void {
  console.log(
    `start-up, spawn → first 200 of /healthz: first start median ${startup.medianMs} ms ` +
      `(${startup.runs.join(", ")}), restart median ${startup.restartMedianMs} ms (${startup.restartRuns.join(", ")}), ` +
      `bare node:http ${startup.bareMedianMs} ms; idle RSS ${startup.idleRssMiB} MiB (bare ${startup.bareIdleRssMiB} MiB); goals: ready ≤ 1000 ms, idle RSS ≤ 120 MiB`,
  );
}
