// Bundles the compiled service (dist/src/main.js, tsc's output) with its npm dependencies into one file,
// dist/provision.js, which `npm start` runs: Node then reads and compiles one file instead of ~800 modules,
// which halves start-up. Modules loaded lazily stay lazy: esbuild initializes each one when first required.
import { build } from "esbuild";

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

await build({
  entryPoints: ["dist/src/main.js"],
  outfile: "dist/provision.js",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  // better-sqlite3 is a native addon, loaded from node_modules as it is.
  external: ["better-sqlite3", ...ABSENT_OPTIONAL_MODULES],
  // esbuild would rename colliding classes (QueryFailedError2…), and error logs name the class.
  keepNames: true,
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "none",
  logLevel: "warning",
  // The CommonJS dependencies expect require, __filename and __dirname.
  banner: {
    js: [
      'import { createRequire as __createRequire } from "node:module";',
      'import { fileURLToPath as __fileURLToPath } from "node:url";',
      'import { dirname as __pathDirname } from "node:path";',
      "const require = __createRequire(import.meta.url);",
      "const __filename = __fileURLToPath(import.meta.url);",
      "const __dirname = __pathDirname(__filename);",
    ].join("\n"),
  },
});
