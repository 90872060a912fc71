import type { DataSource } from "typeorm";
import type { Logger } from "./logger.js";

/** What a request that needs MySQL fails with while MySQL is known to be silent: nothing was sent to it. */
export class DatabaseSilent extends Error {
  readonly code = "DATABASE_SILENT";

  constructor() {
    super("MySQL has been silent: the service is waiting for it to answer a probe before sending it anything");
  }
}

type ConnectionCallback = (error: Error | null, connection?: ProbeConnection) => void;

interface ProbeConnection {
  ping(callback: (error: Error | null) => void): void;
  release(): void;
  destroy(): void;
}

/** The parts of a mysql2 pool this reads: getConnection is wrapped, and waiters are taken off its queue. */
interface WaitingPool {
  getConnection(callback: ConnectionCallback): void;
  _connectionQueue: { length: number; shift(): ConnectionCallback };
}

const PROBE_INTERVAL_MS = 1000;
/** A connection attempt that heard nothing within mysql2's connect timeout. */
const CONNECT_TIMED_OUT = "ETIMEDOUT";

export interface SilentDatabaseGuard {
  /** MySQL was found silent (a statement or a handshake heard nothing for the stall bound). */
  silent(reason: string): void;
  stop(): void;
}

/**
 * Fails fast while MySQL is known to be silent (a partition, a frozen server): once a statement or a new
 * connection has heard nothing for the stall bound, every request waiting for a pooled connection, and every one
 * asking for one afterwards, fails at once with DatabaseSilent (503 `database-unavailable`) instead of each
 * waiting out a bound of its own, round after round. A probe (a pooled connection's ping) each second finds out
 * when MySQL answers again; the first answer ends the state.
 */
export function guardSilentDatabase(dataSource: DataSource, logger: Logger): SilentDatabaseGuard {
  const pool = (dataSource.driver as unknown as { pool: WaitingPool }).pool;
  const getConnection = pool.getConnection.bind(pool);
  let silentSince: number | undefined;
  let probe: NodeJS.Timeout | undefined;

  const answered = () => {
    if (silentSince === undefined) return;
    logger.info({ silentForMs: Date.now() - silentSince }, "MySQL answers again");
    silentSince = undefined;
    clearInterval(probe);
    probe = undefined;
  };
  const silent = (reason: string) => {
    failWaiters(pool);
    if (silentSince !== undefined) return;
    silentSince = Date.now();
    logger.warn({ reason }, "MySQL is silent: requests that need it answer 503 at once until it answers a probe");
    probe = startProbes(getConnection, answered);
  };
  pool.getConnection = (callback) => {
    if (silentSince !== undefined) {
      process.nextTick(() => callback(new DatabaseSilent()));
      return;
    }
    getConnection((error, connection) => {
      if ((error as { code?: string } | null)?.code === CONNECT_TIMED_OUT) silent(error?.message ?? "");
      callback(error, connection);
    });
  };
  return {
    silent,
    stop() {
      clearInterval(probe);
      pool.getConnection = getConnection;
    },
  };
}

function failWaiters(pool: WaitingPool): void {
  while (pool._connectionQueue.length > 0) {
    const waiter = pool._connectionQueue.shift();
    process.nextTick(() => waiter(new DatabaseSilent()));
  }
}

/** Pings through the pool each second, one ping at a time, until one is answered. */
function startProbes(getConnection: WaitingPool["getConnection"], answered: () => void): NodeJS.Timeout {
  let probing = false;
  const timer = setInterval(() => {
    if (probing) return;
    probing = true;
    getConnection((error, connection) => {
      if (error || !connection) {
        probing = false;
        return;
      }
      connection.ping((pingError) => {
        probing = false;
        if (pingError) {
          connection.destroy();
          return;
        }
        connection.release();
        answered();
      });
    });
  }, PROBE_INTERVAL_MS);
  timer.unref();
  return timer;
}
