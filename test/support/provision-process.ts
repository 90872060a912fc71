import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { COMPILED_MAIN, ensureCompiled, SERVICE_NODE_FLAGS } from "./compiled-build.js";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The variables `loadConfig` reads; cleared from the inherited environment so only the test's values count. */
const CONFIG_VARIABLES = [
  "HOST",
  "PORT",
  "DATABASE_URL",
  "REDIS_URL",
  "TLS_CERT_FILE",
  "TLS_KEY_FILE",
  "LOG_LEVEL",
  "BODY_LIMIT_BYTES",
  "SHUTDOWN_GRACE_MS",
  "PROVISION_DATA_DIR",
  "PUBLIC_BASE_URL",
  "ACCESS_TOKEN_TTL_SECONDS",
  "PROVISION_KEY_ENCRYPTION_KEY",
  "PROVISION_BOOTSTRAP_CLIENT_ID",
  "PROVISION_BOOTSTRAP_CLIENT_SECRET",
  "TOKEN_RATE_LIMIT_PER_CLIENT",
  "TOKEN_RATE_LIMIT_PER_ADDRESS",
  "TRUSTED_PROXIES",
  "USER_TOKEN_ISSUER",
  "USER_TOKEN_JWKS_URL",
  "USER_TOKEN_AUDIENCE",
  "WEBHOOK_RETRY_SCHEDULE",
  "WEBHOOK_TIMEOUT_MS",
  "WEBHOOK_TRUSTED_TARGETS",
  "WEBHOOK_RETENTION_DAYS",
  "WEBHOOK_CONCURRENCY",
  "WEBHOOK_POLL_INTERVAL_MS",
  "WEBHOOK_CALLBACK_TOKEN_TTL_SECONDS",
  "WEBHOOK_SUSPEND_AFTER",
  "WEBHOOK_EXPIRING_NOTICE",
  "WEBHOOK_TRIAL_EXPIRING_NOTICE",
  "SCHEDULER_INTERVAL_MS",
];

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ProvisionProcess {
  child: ChildProcess;
  /** Everything written so far. */
  stdout(): string;
  stderr(): string;
  /** The stdout lines that are JSON log records, parsed. */
  logRecords(): Record<string, any>[];
  /** Resolves with the first log record `matches` accepts; rejects after `timeoutMs` or if the process exits. */
  waitForLog(matches: (record: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  exited: Promise<Exit>;
  /** Waits up to `timeoutMs` for the exit; undefined if the process is still running then. */
  exitWithin(timeoutMs: number): Promise<Exit | undefined>;
  /** Kills whatever is left of the process group, which outlives its leader when npm leaves an orphan. */
  kill(): void;
}

/**
 * Runs the compiled service with only `env` as its configuration: as `npm start` does (`node dist/provision.js`,
 * built first if a source changed since the last build), or through `npm start` itself when `throughNpm` is set,
 * or another copy of the built entry point (`main`).
 */
export function spawnProvision(
  env: Record<string, string>,
  { throughNpm = false, main = COMPILED_MAIN } = {},
): ProvisionProcess {
  ensureCompiled();
  const base = { ...process.env };
  for (const name of CONFIG_VARIABLES) delete base[name];
  const [command, args] = throughNpm ? ["npm", ["start"]] : [process.execPath, [...SERVICE_NODE_FLAGS, main]];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let stdout = "";
  let stderr = "";
  const listeners = new Set<() => void>();
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  let exit: Exit | undefined;
  const exited = new Promise<Exit>((resolve) => {
    child.once("close", (code, signal) => {
      exit = { code, signal };
      for (const listener of listeners) listener();
      resolve(exit);
    });
  });

  const logRecords = () =>
    stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, any>];
        } catch {
          return [];
        }
      });

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    logRecords,
    exited,
    waitForLog(matches, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = logRecords().find(matches);
          if (found) finish(() => resolve(found));
          else if (exit) {
            finish(() => reject(new Error(`process exited (${JSON.stringify(exit)}) first; stderr: ${stderr}`)));
          }
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`no matching log line within ${timeoutMs} ms; stdout: ${stdout}`))),
          timeoutMs,
        );
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        listeners.add(check);
        check();
      });
    },
    async exitWithin(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      });
      const result = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      return result;
    },
    kill() {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    },
  };
}
