// The Node flags `npm start` gives the service (package.json's start script, the one place they are set).
// Whatever starts the compiled service passes them too (the build's warm-up, the tests, the benchmarks), as V8
// takes a code cache only under the flags it was made with.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** @type {string[]} */
export const SERVICE_NODE_FLAGS = (
  /^exec node (.*?)\s*dist\/provision\.js$/.exec(
    JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts.start,
  )?.[1] ?? ""
)
  .split(" ")
  .filter(Boolean);
