import type { DataSource } from "typeorm";
import type { Logger } from "./logger.js";

/** What a request that needs MySQL fails with while MySQL is known to be silent: nothing was sent to it. */
export class DatabaseSilent extends Error {
  readonly code = "DATABASE_SILENT";

  constructor() {
    super("MySQL is silent: the service sends it nothing until a new connection to it is answered");
  }
}

type ConnectionCallback = (error: Error | null, connection?: unknown) => void;

interface Destroyable {
  destroy(): void;
}

/** The parts of a mysql2 pool this reads: getConnection is wrapped; waiters and idle connections are let go. */
interface WaitingPool {
  getConnection(callback: ConnectionCallback): void;
  _connectionQueue: { length: number; shift(): ConnectionCallback };
  _freeConnections: { length: number; get(index: number): Destroyable };
}

/** What a fresh connection is made with: the mysql2 module of the pool. */
interface Mysql2 {
  createConnection(options: { uri: string; connectTimeout: number }): {
    on(event: "error", listener: () => void): void;
    ping(callback: (error: Error | null) => void): void;
    destroy(): void;
  };
}

const PROBE_INTERVAL_MS = 1000;
/** How long a new connection may take to answer a ping before MySQL is taken as silent. */
const CHECK_MS = 2000;
/** A connection attempt that heard nothing within mysql2's connect timeout. */
const CONNECT_TIMED_OUT = "ETIMEDOUT";

export interface SilentDatabaseGuard {
  /** Something heard nothing from MySQL for the stall bound: find out whether MySQL itself is silent. */
  suspect(reason: string): void;
  stop(): void;
}

const UNGUARDED: SilentDatabaseGuard = { suspect: () => {}, stop: () => {} };

/**
 * Fails fast while MySQL is silent (a partition, a frozen server). When a statement or a new connection has heard
 * nothing for the stall bound, a new connection pings MySQL; unanswered within CHECK_MS, MySQL is taken as silent:
 * every request waiting for a pooled connection, and every one asking for one afterwards, fails at once with
 * DatabaseSilent (503 `database-unavailable`) instead of each waiting out a bound of its own, round after round,
 * and the idle pooled connections are closed (they may be as dead as the rest). A new connection pings each second
 * until one is answered, which ends the state. A silence of one statement on a MySQL that answers (a long query, a
 * lock) opens nothing.
 */
export function guardSilentDatabase(dataSource: DataSource, url: string, logger: Logger): SilentDatabaseGuard {
  const pool = (dataSource.driver as unknown as { pool: Partial<WaitingPool> }).pool;
  if (!isWaitingPool(pool)) {
    logger.warn("MySQL's silence is not failed fast: this mysql2 pool is not the one expected");
    return UNGUARDED;
  }
  const mysql = (dataSource.driver as unknown as { mysql: Mysql2 }).mysql;
  const answers = () => answersAFreshConnection(mysql, url);
  const getConnection = pool.getConnection.bind(pool);
  let silentSince: number | undefined;
  let checking = false;
  let stopped = false;
  let probe: NodeJS.Timeout | undefined;

  const answered = () => {
    if (silentSince === undefined) return;
    logger.info({ silentForMs: Date.now() - silentSince }, "MySQL answers again");
    silentSince = undefined;
    clearInterval(probe);
    probe = undefined;
  };
  const silent = (reason: string) => {
    silentSince = Date.now();
    logger.warn({ reason }, "MySQL is silent: requests that need it answer 503 at once until it answers again");
    failWaiters(pool);
    closeIdle(pool);
    probe = startProbes(answers, answered);
  };
  const suspect = (reason: string) => {
    if (silentSince !== undefined) {
      failWaiters(pool);
      return;
    }
    if (checking) return;
    checking = true;
    answers().then((answering) => {
      checking = false;
      if (!answering && silentSince === undefined && !stopped) silent(reason);
    });
  };
  pool.getConnection = (callback) => {
    if (silentSince !== undefined) {
      process.nextTick(() => callback(new DatabaseSilent()));
      return;
    }
    getConnection((error, connection) => {
      if ((error as { code?: string } | null)?.code === CONNECT_TIMED_OUT) suspect(error?.message ?? "");
      callback(error, connection);
    });
  };
  return {
    suspect,
    stop() {
      stopped = true;
      clearInterval(probe);
      pool.getConnection = getConnection;
    },
  };
}

function isWaitingPool(pool: Partial<WaitingPool> | undefined): pool is WaitingPool {
  return (
    typeof pool?.getConnection === "function" &&
    typeof pool._connectionQueue?.shift === "function" &&
    typeof pool._freeConnections?.get === "function"
  );
}

function failWaiters(pool: WaitingPool): void {
  while (pool._connectionQueue.length > 0) {
    const waiter = pool._connectionQueue.shift();
    process.nextTick(() => waiter(new DatabaseSilent()));
  }
}

function closeIdle(pool: WaitingPool): void {
  const idle: Destroyable[] = [];
  for (let index = 0; index < pool._freeConnections.length; index++) idle.push(pool._freeConnections.get(index));
  // destroy takes each out of the pool.
  for (const connection of idle) connection.destroy();
}

/** Whether a new connection to MySQL answers a ping within CHECK_MS. */
function answersAFreshConnection(mysql: Mysql2, url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const connection = mysql.createConnection({ uri: url, connectTimeout: CHECK_MS });
    const settle = (answering: boolean) => {
      clearTimeout(timer);
      connection.destroy();
      resolve(answering);
    };
    const timer = setTimeout(() => settle(false), CHECK_MS);
    connection.on("error", () => settle(false));
    connection.ping((error) => settle(!error));
  });
}

/** Checks each second, one check at a time, until MySQL answers. */
function startProbes(answers: () => Promise<boolean>, answered: () => void): NodeJS.Timeout {
  let probing = false;
  const timer = setInterval(() => {
    if (probing) return;
    probing = true;
    answers().then((answering) => {
      probing = false;
      if (answering) answered();
    });
  }, PROBE_INTERVAL_MS);
  timer.unref();
  return timer;
}
