import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import test, { type ExecutionContext } from "ava";
import { COMPILED_MAIN, ensureCompiled } from "../support/compiled-build.js";
import { spawnProvision } from "../support/provision-process.js";

const DIST = path.dirname(COMPILED_MAIN);
const BUNDLE = "provision-bundle.cjs";

/** A copy of the built entry point and bundle in a folder of its own under dist/ (node_modules still resolve). */
function copyOfBuild(t: ExecutionContext): { main: string; cacheFile: string } {
  ensureCompiled();
  const cacheName = fs
    .readdirSync(DIST)
    .find((name) => name.startsWith("provision-bundle.") && name.endsWith(".cache"));
  if (!cacheName) throw new Error("the build wrote no code cache");
  const folder = fs.mkdtempSync(path.join(DIST, ".code-cache-test-"));
  t.teardown(() => fs.rmSync(folder, { recursive: true, force: true }));
  for (const file of [path.basename(COMPILED_MAIN), BUNDLE])
    fs.copyFileSync(path.join(DIST, file), path.join(folder, file));
  return { main: path.join(folder, path.basename(COMPILED_MAIN)), cacheFile: path.join(folder, cacheName) };
}

/** Starts the copy on a fresh SQLite file, asks /healthz, stops it with SIGTERM. */
async function startAndStop(t: ExecutionContext, main: string, dataFile: string): Promise<void> {
  const service = spawnProvision({ DATABASE_URL: `sqlite:${dataFile}`, PORT: "0", HOST: "127.0.0.1" }, { main });
  t.teardown(() => service.kill());
  const listening = await service.waitForLog((record) => record.msg === "provision is listening");
  t.is((await fetch(`http://127.0.0.1:${listening.port}/healthz`)).status, 200);
  service.child.kill("SIGTERM");
  t.is((await service.exitWithin(15_000))?.code, 0, service.stderr());
}

test("the build leaves a code cache; one V8 refuses is replaced when the service exits, and a good one is kept", async (t) => {
  const { main, cacheFile } = copyOfBuild(t);
  const garbage = randomBytes(4096);
  fs.writeFileSync(cacheFile, garbage);
  const dataFile = path.join(path.dirname(main), "provision.sqlite");

  await startAndStop(t, main, dataFile);
  const written = fs.readFileSync(cacheFile);
  t.false(written.equals(garbage), "the refused cache was replaced");
  t.true(written.length > 100_000, `a cache of the compiled code (${written.length} bytes)`);
  const writtenAt = fs.statSync(cacheFile).mtimeMs;

  await startAndStop(t, main, dataFile);
  t.is(fs.statSync(cacheFile).mtimeMs, writtenAt, "an accepted cache is not written again");
  t.deepEqual(partialFiles(main), [], "no partial file is left");
});

test("a service whose code cache cannot be written starts and stops as usual", async (t) => {
  const { main, cacheFile } = copyOfBuild(t);
  // A folder where the cache file should be: reading it fails, and so does the rename over it at exit.
  fs.mkdirSync(cacheFile);
  await startAndStop(t, main, path.join(path.dirname(main), "provision.sqlite"));
  t.true(fs.statSync(cacheFile).isDirectory());
  t.deepEqual(partialFiles(main), [], "the partial file was removed");
});

function partialFiles(main: string): string[] {
  return fs.readdirSync(path.dirname(main)).filter((name) => name.includes(".cache."));
}
