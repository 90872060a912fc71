// Bundles the compiled service (dist/src/main.js, tsc's output) with its npm dependencies into one file,
// dist/provision-bundle.cjs: Node then reads and compiles one file instead of ~800 modules, which halves
// start-up. Modules loaded lazily stay lazy: esbuild initializes each one when first required. Then writes
// dist/provision.js, which `npm start` runs: the bundle with V8's code cache (scripts/provision-loader.mjs),
// and starts it once on a scratch SQLite file so that the cache exists before the first real start.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { build } from "esbuild";
import { SERVICE_NODE_FLAGS } from "./service-node-flags.mjs";

const BUNDLE = "dist/provision-bundle.cjs";
const LOADER = "dist/provision.js";
/** TypeORM requires every driver it supports by name; those not installed stay `require` calls that never run. */
const ABSENT_OPTIONAL_MODULES = [
  "@google-cloud/spanner",
  "@sap/hana-client",
  "@sap/hana-client/extension/Stream",
  "hdb-pool",
  "ioredis",
  "mongodb",
  "mssql",
  "mysql",
  "oracledb",
  "pg",
  "pg-native",
  "pg-query-stream",
  "react-native-sqlite-storage",
  "redis-clustr",
  "sql.js",
  "sqlite3",
  "typeorm-aurora-data-api-driver",
  "pino-pretty",
  "@node-rs/xxhash",
];

for (const stale of fs.readdirSync("dist").filter((name) => name.startsWith("provision-bundle."))) {
  fs.rmSync(path.join("dist", stale), { force: true });
}

await build({
  entryPoints: ["dist/src/main.js"],
  outfile: BUNDLE,
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  // better-sqlite3 is a native addon, loaded from node_modules as it is.
  external: ["better-sqlite3", ...ABSENT_OPTIONAL_MODULES],
  // esbuild would rename colliding classes (QueryFailedError2…), and error logs name the class.
  keepNames: true,
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "none",
  logLevel: "warning",
});

const bundleId = createHash("sha256").update(fs.readFileSync(BUNDLE)).digest("hex");
const loader = fs.readFileSync("scripts/provision-loader.mjs", "utf8").replace("%BUNDLE_ID%", bundleId);
fs.writeFileSync(LOADER, `// Written by scripts/bundle.mjs from scripts/provision-loader.mjs.\n${loader}`);

await warmUp();

/** Starts the service on a scratch SQLite file, asks /healthz once and stops it: on exit it writes the code cache. */
async function warmUp() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "provision-warm-up-"));
  const env = {
    PATH: process.env.PATH,
    DATABASE_URL: `sqlite:${path.join(scratch, "warm-up.sqlite")}`,
    PORT: "0",
    HOST: "127.0.0.1",
  };
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, LOADER], { env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  let asked = false;
  child.stdout.on("data", (chunk) => {
    output += chunk;
    const port = /"port":(\d+).*"provision is listening"/.exec(output)?.[1];
    if (port && !asked) {
      asked = true;
      fetch(`http://127.0.0.1:${port}/healthz`)
        .catch(() => undefined)
        .finally(() => child.kill("SIGTERM"));
    }
  });
  child.stderr.on("data", (chunk) => {
    output += chunk;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const code = await new Promise((resolve) => child.on("exit", (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  fs.rmSync(scratch, { recursive: true, force: true });
  if (code !== 0)
    console.warn(
      `bundle: the warm-up start failed (exit ${code}); the first start will write the code cache\n${output}`,
    );
}
