import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { TEST_REDIS_URL } from "./test-server.js";

const run = promisify(execFile);

/** The CLI's environment: the database, and the Redis that running test servers hear client changes through. */
function cliEnv(databaseUrl: string): NodeJS.ProcessEnv {
  const redis = databaseUrl.startsWith("mysql:") ? { REDIS_URL: TEST_REDIS_URL } : {};
  return { ...process.env, DATABASE_URL: databaseUrl, ...redis };
}

/** Runs `npm run cli -- …` the way an operator does (node with the tsx loader), against `databaseUrl`. */
export async function cli(databaseUrl: string, ...args: string[]): Promise<any> {
  return cliWithEnv({}, databaseUrl, ...args);
}

/** `cli` with these variables set beside (or in place of) the usual ones. */
export async function cliWithEnv(extra: NodeJS.ProcessEnv, databaseUrl: string, ...args: string[]): Promise<any> {
  const { stdout } = await run(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    env: { ...cliEnv(databaseUrl), ...extra },
  });
  return JSON.parse(stdout);
}

/** The exit code and standard error of a CLI call that is meant to fail. */
export function cliFailure(databaseUrl: string, ...args: string[]): Promise<{ code: number; stderr: string }> {
  return cliFailureWithEnv({}, databaseUrl, ...args);
}

/** cliFailure with more environment variables. */
export async function cliFailureWithEnv(
  extra: NodeJS.ProcessEnv,
  databaseUrl: string,
  ...args: string[]
): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
      env: { ...cliEnv(databaseUrl), ...extra },
    });
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, stderr: failure.stderr };
  }
  throw new Error(`cli ${args.join(" ")} succeeded`);
}
