import type { DataSource } from "typeorm";
import type { Logger } from "./logger.js";

/**
 * What a statement fails with when its connection received nothing for too long: mysql2's lost connection
 * (`fatal`), so it answers as the database out of reach (or a COMMIT in doubt) does.
 */
export class StatementStalled extends Error {
  readonly code = "STATEMENT_STALLED";
  readonly fatal = true;

  constructor(stallMs: number) {
    super(`MySQL sent nothing for ${stallMs / 1000} s while a statement was pending: its connection was closed`);
  }
}

/** The parts of a mysql2 pool connection the watch reads. */
interface PooledConnection {
  /** The command sent and not answered yet (a statement, or the handshake of a new connection); null when idle. */
  _command: unknown;
  stream: { bytesRead: number; destroy(error?: Error): void };
  /** Takes the connection out of its pool and closes it. */
  destroy(): void;
}

interface ConnectionPool {
  _allConnections: { length: number; get(index: number): PooledConnection };
}

interface Silence {
  bytesRead: number;
  since: number;
}

/**
 * Closes a pooled MySQL connection that waits for an answer and has received nothing for `stallMs`: a network
 * gone silent (a partition, a host gone without a reset) would otherwise hold the statement, its request and its
 * connection until TCP gives up, about fifteen minutes later. Its statement fails as a lost connection and the
 * pool makes a new connection. A sweep of the pool each second finds them, so statements cost nothing to watch
 * and every statement is watched, whoever sent it. Answers the watch's stop.
 *
 * The sweep reads fields of mysql2's pool and connections that are not its public API (the version is pinned in
 * package.json): when they are not there, the watch warns once and stops rather than fail every second.
 */
export function watchStalledStatements(
  dataSource: DataSource,
  stallMs: number,
  logger: Logger,
  onStall: (reason: string) => void = () => {},
): () => void {
  const pool = (dataSource.driver as unknown as { pool: ConnectionPool }).pool;
  const cannotWatch = (problem: string) => {
    logger.warn({ problem }, "MySQL statements are not watched for silence: this mysql2 is not the one expected");
    return () => {};
  };
  const shape = poolShapeProblem(pool);
  if (shape) return cannotWatch(shape);
  let silences = new Map<PooledConnection, Silence>();
  const sweep = setInterval(
    () => {
      try {
        silences = silencesNow(pool, silences);
        if (closeStalled(silences, stallMs) > 0) onStall(new StatementStalled(stallMs).message);
      } catch (error) {
        clearInterval(sweep);
        cannotWatch((error as Error).message);
      }
    },
    Math.min(1000, stallMs / 4),
  );
  sweep.unref();
  return () => clearInterval(sweep);
}

/** What is missing of what the watch reads in mysql2's pool and its connections; undefined when nothing is. */
export function poolShapeProblem(pool: unknown): string | undefined {
  const connections = (pool as Partial<ConnectionPool> | undefined)?._allConnections;
  if (typeof connections?.length !== "number" || typeof connections.get !== "function") {
    return "the pool has no _allConnections queue";
  }
  for (let index = 0; index < connections.length; index++) {
    const problem = connectionShapeProblem(connections.get(index));
    if (problem) return problem;
  }
  return undefined;
}

function connectionShapeProblem(connection: Partial<PooledConnection> | undefined): string | undefined {
  if (!connection || !("_command" in connection)) return "a pooled connection has no _command";
  if (typeof connection.stream?.bytesRead !== "number") return "a pooled connection's stream has no bytesRead";
  if (typeof connection.destroy !== "function") return "a pooled connection has no destroy()";
  return undefined;
}

/** Each connection waiting for an answer, and since when it has received nothing (as far as sweeps can tell). */
function silencesNow(pool: ConnectionPool, before: Map<PooledConnection, Silence>): Map<PooledConnection, Silence> {
  const now = Date.now();
  const silences = new Map<PooledConnection, Silence>();
  for (let index = 0; index < pool._allConnections.length; index++) {
    const connection = pool._allConnections.get(index);
    const shape = connectionShapeProblem(connection);
    if (shape) throw new Error(shape);
    if (!connection._command) continue;
    const bytesRead = connection.stream.bytesRead;
    const silence = before.get(connection);
    silences.set(connection, silence?.bytesRead === bytesRead ? silence : { bytesRead, since: now });
  }
  return silences;
}

/** Closes each connection silent for `stallMs`; answers how many it closed. */
function closeStalled(silences: Map<PooledConnection, Silence>, stallMs: number): number {
  const now = Date.now();
  let closed = 0;
  for (const [connection, silence] of silences) {
    if (now - silence.since < stallMs) continue;
    silences.delete(connection);
    // The error reaches the command in flight (mysql2 hands a socket error to it); destroy takes the connection
    // out of the pool, which would otherwise hand it out again.
    connection.stream.destroy(new StatementStalled(stallMs));
    connection.destroy();
    closed++;
  }
  return closed;
}
