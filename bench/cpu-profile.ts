import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { REPO_ROOT } from "../test/support/provision-process.js";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Share {
  name: string;
  percent: number;
}

/**
 * Where a V8 CPU profile (.cpuprofile) spent the samples of one time window: by function and by file or
 * package, self and total. The window is the `seconds` that ended `endedMsBeforeExit` before the profile did.
 */
export function summarizeProfile(file: string, window: { seconds: number; endedMsBeforeExit: number }, top = 20) {
  const profile = readProfile(file);
  const parentOf = new Map<number, ProfileNode>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node);
  const toUs = profile.endTime - window.endedMsBeforeExit * 1000;
  const self = new Map<string, number>();
  const selfByFile = new Map<string, number>();
  const total = new Map<string, number>();
  let samples = 0;
  forEachSample(profile, { fromUs: toUs - window.seconds * 1_000_000, toUs }, (leaf) => {
    samples++;
    add(self, functionOf(leaf), 1);
    add(selfByFile, fileOf(leaf.callFrame.url) || functionOf(leaf), 1);
    // A function counts once per sample however often it recurs on the stack.
    const onStack = new Set<string>();
    for (let node: ProfileNode | undefined = leaf; node; node = parentOf.get(node.id)) onStack.add(functionOf(node));
    for (const key of onStack) add(total, key, 1);
  });
  const ranked = (shares: Map<string, number>, keep: (name: string) => boolean = () => true): Share[] =>
    [...shares]
      .filter(([name]) => keep(name))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, hits]) => ({ name, percent: Number(((100 * hits) / samples).toFixed(1)) }));
  return {
    samples,
    selfByFunction: ranked(self),
    selfByFile: ranked(selfByFile),
    /** Total (self + callees) of the service's own functions: which of its steps the time goes under. */
    totalOfOwnFunctions: ranked(total, (name) => name.includes(" src/")),
  };
}

function readProfile(file: string): CpuProfile {
  return JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile;
}

/** Calls `visit` with the leaf node and the duration (µs) of each sample taken between `fromUs` and `toUs`. */
function forEachSample(
  profile: CpuProfile,
  window: { fromUs: number; toUs: number },
  visit: (leaf: ProfileNode, microseconds: number) => void,
): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  let time = profile.endTime - profile.timeDeltas.reduce((sum, delta) => sum + delta, 0);
  profile.samples.forEach((id, index) => {
    time += profile.timeDeltas[index];
    if (time >= window.fromUs && time <= window.toUs) visit(byId.get(id) as ProfileNode, profile.timeDeltas[index]);
  });
}

function add(shares: Map<string, number>, key: string, hits: number) {
  shares.set(key, (shares.get(key) ?? 0) + hits);
}

function functionOf({ callFrame }: ProfileNode): string {
  const name = callFrame.functionName || "(anonymous)";
  const where = fileOf(callFrame.url);
  return where ? `${name} ${where}:${callFrame.lineNumber + 1}` : name;
}

/** `src/licensing/x.js`, `node_modules/<package>`, `node:internal/...`; "" for V8's own entries ((program), (gc)). */
function fileOf(url: string): string {
  const local = url.replace(`file://${REPO_ROOT}`, "").replace(/^dist\//, "");
  const packageName = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(local)?.[1];
  return packageName ? `node_modules/${packageName}` : local;
}

/** A monotonic instant in microseconds, on the clock V8 stamps a CPU profile's samples with. */
export function monotonicMicroseconds(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * The CPU microseconds per request each function and each file took in a profile, over the samples between
 * `fromUs` and `toUs` (monotonicMicroseconds instants) in which `requests` were answered; `(idle)` included.
 */
export function microsecondsPerRequest(file: string, window: { fromUs: number; toUs: number; requests: number }) {
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  forEachSample(readProfile(file), window, (leaf, microseconds) => {
    const perRequest = microseconds / window.requests;
    add(byFunction, functionOf(leaf), perRequest);
    add(byFile, fileOf(leaf.callFrame.url) || functionOf(leaf), perRequest);
  });
  return { byFunction, byFile };
}

/** The one profile a process started with `--cpu-prof-dir=folder` wrote there. */
export function profileIn(folder: string, stderr: () => string): string {
  const [profile] = fs.readdirSync(folder).filter((name) => name.endsWith(".cpuprofile"));
  if (!profile) throw new Error(`no profile written: ${stderr()}`);
  return path.join(folder, profile);
}

/** A new temporary folder for a profiled service to write its profile into (see profiledMain). */
export function profileFolder(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "provision-profile-"));
}

/**
 * Stops a service started with profiledMain(folder) and summarizes the profile it wrote over the measured window:
 * `seconds` long, ending `endedMsBeforeStop` before the stop began.
 */
export async function stopAndSummarize(
  folder: string,
  service: { stop(): Promise<void>; stderr(): string },
  window: { seconds: number; endedMsBeforeStop?: number },
) {
  const stopping = performance.now();
  await service.stop();
  const endedMsBeforeExit = (window.endedMsBeforeStop ?? 0) + performance.now() - stopping;
  const file = profileIn(folder, service.stderr);
  return { profile: file, ...summarizeProfile(file, { seconds: window.seconds, endedMsBeforeExit }) };
}
