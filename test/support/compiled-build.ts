import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SERVICE_NODE_FLAGS } from "../../scripts/service-node-flags.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DIST = path.join(ROOT, "dist");
/** What `npm start` runs: tsc's output bundled into one file (scripts/bundle.mjs). */
export const COMPILED_MAIN = path.join(DIST, "provision.js");
/** The flags `npm start` gives the service (scripts/service-node-flags.mjs reads them from package.json). */
export { SERVICE_NODE_FLAGS };

const SOURCES = ["src", "gen"];
const CONFIGS = ["tsconfig.json", "tsconfig.build.json"];
/** Written after each build; its mtime is when that build started. */
export const BUILD_STAMP = path.join(DIST, ".compiled-at");
const LOCK = path.join(DIST, ".build-lock");
const STALE_LOCK_MS = 120_000;

/**
 * Makes sure dist/ holds the compiled service of the current sources, building it (`npm run build`) when a
 * source is newer than the last build, so tests and the benchmark run what `npm start` runs. One process at a
 * time builds; the others wait for it.
 */
export function ensureCompiled(): void {
  if (isFresh()) return;
  while (!takeLock()) {
    sleep(200);
    if (isFresh()) return;
  }
  try {
    if (isFresh()) return;
    build();
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true });
  }
}

function build(): void {
  const started = new Date();
  const tsc = path.join(ROOT, "node_modules", "typescript", "bin", "tsc");
  fs.rmSync(COMPILED_MAIN, { force: true });
  const compiled = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: ROOT, encoding: "utf8" });
  // Type errors still emit JavaScript (`npm run typecheck` is where they fail); a missing entry point does not.
  const bundled = spawnSync(process.execPath, [path.join(ROOT, "scripts", "bundle.mjs")], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (!fs.existsSync(COMPILED_MAIN)) {
    const output = [compiled, bundled].map((result) => `${result.stdout}${result.stderr}`).join("");
    throw new Error(`the build produced no ${COMPILED_MAIN}: ${output}`);
  }
  // Stamped with the start: a source saved while tsc ran is newer than the stamp, so the next check rebuilds.
  fs.writeFileSync(BUILD_STAMP, started.toISOString());
  fs.utimesSync(BUILD_STAMP, started, started);
}

function isFresh(): boolean {
  const built = mtimeOf(BUILD_STAMP);
  if (built === 0 || !fs.existsSync(COMPILED_MAIN)) return false;
  return newestSource() <= built;
}

function newestSource(): number {
  let newest = Math.max(...CONFIGS.map((file) => mtimeOf(path.join(ROOT, file))));
  for (const folder of SOURCES) {
    for (const entry of fs.readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith(".ts")) {
        newest = Math.max(newest, mtimeOf(path.join(entry.parentPath, entry.name)));
      }
    }
  }
  return newest;
}

function mtimeOf(file: string): number {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function takeLock(): boolean {
  try {
    fs.mkdirSync(DIST, { recursive: true });
    fs.mkdirSync(LOCK);
    return true;
  } catch {
    if (Date.now() - mtimeOf(LOCK) > STALE_LOCK_MS) fs.rmSync(LOCK, { recursive: true, force: true });
    return false;
  }
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
