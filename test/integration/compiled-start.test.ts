import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import anyTest, { type TestFn } from "ava";
import { BUILD_STAMP, COMPILED_MAIN, ensureCompiled, SERVICE_NODE_FLAGS } from "../support/compiled-build.js";
import { type ProvisionProcess, REPO_ROOT, spawnProvision } from "../support/provision-process.js";
import { createTestDatabase, TEST_REDIS_URL } from "../support/test-server.js";

const test = anyTest as TestFn<{ tmp: string; processes: ProvisionProcess[] }>;
const run = promisify(execFile);

test.before(() => ensureCompiled());

test.beforeEach((t) => {
  t.context.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "provision-compiled-"));
  t.context.processes = [];
});

test.afterEach.always((t) => {
  for (const child of t.context.processes) child.kill();
  fs.rmSync(t.context.tmp, { recursive: true, force: true });
});

test("a source newer than the last build makes the next spawn build again first", (t) => {
  t.timeout(180_000);
  const longAgo = new Date(2000, 0, 1);
  fs.utimesSync(BUILD_STAMP, longAgo, longAgo);
  const before = Date.now();
  ensureCompiled();
  t.true(fs.statSync(BUILD_STAMP).mtimeMs >= before - 1000, "built again");
  t.true(fs.existsSync(COMPILED_MAIN));
  ensureCompiled();
  t.true(fs.statSync(BUILD_STAMP).mtimeMs >= before - 1000);
});

/** Command lines of the processes in process group `group` (Linux /proc). */
function commandLinesOfGroup(group: number): string[][] {
  return fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return [];
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const groupId = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
      if (groupId !== group) return [];
      return [fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean)];
    } catch {
      return [];
    }
  });
}

test("npm start execs node on the compiled service, without the TypeScript loader", async (t) => {
  const child = spawnProvision(
    {
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: `sqlite:${path.join(t.context.tmp, "p.sqlite")}`,
      LOG_LEVEL: "info",
    },
    { throughNpm: true },
  );
  t.context.processes.push(child);
  await child.waitForLog((record) => record.msg === "provision is listening");

  const service = commandLinesOfGroup(child.child.pid ?? -1).filter((args) =>
    args.some((arg) => arg.endsWith("provision.js") || arg.endsWith("main.ts")),
  );
  t.is(service.length, 1, JSON.stringify(service));
  t.deepEqual(service[0].slice(1), [...SERVICE_NODE_FLAGS, "dist/provision.js"]);
  t.false(
    service[0].some((arg) => arg.includes("tsx")),
    "no tsx loader",
  );
});

/**
 * Starts the compiled app (as main.js does, without listening) on `databaseUrl` and answers the npm packages
 * and files it loaded, as paths below node_modules.
 */
async function modulesLoadedBy(env: Record<string, string>): Promise<string[]> {
  const script = `
    import { createRequire } from "node:module";
    import { loadConfig } from "./dist/src/platform/config.js";
    import { createLogger } from "./dist/src/platform/logger.js";
    import { createApp } from "./dist/src/app.js";
    const app = await createApp(loadConfig(), createLogger("silent"));
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    await app.close();
    process.stdout.write(JSON.stringify(loaded));
  `;
  const { PATH, HOME } = process.env;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
    cwd: REPO_ROOT,
    env: { PATH, HOME, ...env },
  });
  return (JSON.parse(stdout) as string[]).flatMap((file) => {
    const index = file.lastIndexOf("node_modules/");
    return index < 0 ? [] : [file.slice(index + "node_modules/".length)];
  });
}

test("a bad configuration is reported before the service's modules are loaded", async (t) => {
  const reporter = path.join(t.context.tmp, "report-modules.cjs");
  fs.writeFileSync(
    reporter,
    `process.on("exit", () => process.stdout.write(JSON.stringify(Object.keys(require.cache))));`,
  );
  const { PATH, HOME } = process.env;
  const failed = await run(process.execPath, ["--require", reporter, COMPILED_MAIN], {
    cwd: REPO_ROOT,
    env: { PATH, HOME, PORT: "abc" },
  }).then(
    () => undefined,
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
  t.is(failed?.code, 2);
  t.regex(failed?.stderr ?? "", /\bPORT\b/);
  const loaded = JSON.parse(failed?.stdout ?? "[]") as string[];
  t.false(
    loaded.some((file) => file.includes("node_modules/typeorm/")),
    "typeorm was loaded",
  );
});

const packageLoaded = (modules: string[], name: string) => modules.some((file) => file.startsWith(`${name}/`));

test("the embedded service loads better-sqlite3, and not mysql2", async (t) => {
  t.true(fs.existsSync(COMPILED_MAIN));
  const modules = await modulesLoadedBy({ DATABASE_URL: `sqlite:${path.join(t.context.tmp, "p.sqlite")}` });
  t.true(packageLoaded(modules, "better-sqlite3"), "it ran on SQLite");
  t.false(packageLoaded(modules, "mysql2"));
});

// Fails while src/app.ts imports the Redis coordinator and invalidation bus statically (see issue 10).
test("the embedded service does not load the Redis client", async (t) => {
  const modules = await modulesLoadedBy({ DATABASE_URL: `sqlite:${path.join(t.context.tmp, "p.sqlite")}` });
  t.false(packageLoaded(modules, "@redis/client"));
  t.false(packageLoaded(modules, "redis"));
});

test("on MySQL and Redis the service loads mysql2 and the Redis client, and not better-sqlite3", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const modules = await modulesLoadedBy({ DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL });
  t.true(packageLoaded(modules, "mysql2"));
  t.true(packageLoaded(modules, "@redis/client"));
  t.false(packageLoaded(modules, "redis"), "the client alone, without the `redis` package's modules");
  t.false(packageLoaded(modules, "@redis/search"));
  t.false(packageLoaded(modules, "better-sqlite3"));
});

// Fails while a source file imports a value from "typeorm" itself instead of its module (see issue 10).
test("the service loads the TypeORM modules it uses, not typeorm's index (CLI, decorators, helpers)", async (t) => {
  const modules = await modulesLoadedBy({ DATABASE_URL: `sqlite:${path.join(t.context.tmp, "p.sqlite")}` });
  t.true(packageLoaded(modules, "typeorm"));
  t.false(modules.includes("typeorm/index.js"));
});
