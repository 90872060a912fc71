// The template of dist/provision.js, what `npm start` runs; scripts/bundle.mjs writes it with the bundle's id.
// It runs dist/provision-bundle.cjs with V8's code cache: the code compiled by an earlier run of the same bundle
// (under the same Node and flags) is loaded instead of compiled again, which takes a fifth to a third off start-up.
// With no cache yet, or one V8 refuses, the cache is written when the process exits; where dist/ cannot be
// written, nothing is, and every start compiles as before.
import fs from "node:fs";
import Module, { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

/** The bundle's SHA-256: a cache is used only with the bundle it was made from (V8 itself checks only its length). */
const BUNDLE_ID = "%BUNDLE_ID%";

const directory = path.dirname(fileURLToPath(import.meta.url));
const bundleFile = path.join(directory, "provision-bundle.cjs");
const cacheFile = path.join(directory, `provision-bundle.${BUNDLE_ID.slice(0, 16)}.cache`);

const cachedData = readCache();
const script = new vm.Script(Module.wrap(fs.readFileSync(bundleFile, "utf8")), {
  filename: bundleFile,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
if (cachedData === undefined || script.cachedDataRejected) process.once("exit", writeCache);
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(bundleFile), module, bundleFile, directory);

function readCache() {
  try {
    return fs.readFileSync(cacheFile);
  } catch {
    return undefined;
  }
}

/** Written whole under another name, then renamed: a start reading it meanwhile sees the old file or the new. */
function writeCache() {
  const partial = `${cacheFile}.${process.pid}`;
  try {
    fs.writeFileSync(partial, script.createCachedData());
    fs.renameSync(partial, cacheFile);
  } catch {
    fs.rmSync(partial, { force: true });
  }
}
