import type { DataSource } from "typeorm";

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
 */
export function watchStalledStatements(dataSource: DataSource, stallMs: number): () => void {
  const pool = (dataSource.driver as unknown as { pool: ConnectionPool }).pool;
  let silences = new Map<PooledConnection, Silence>();
  const sweep = setInterval(
    () => {
      silences = silencesNow(pool, silences);
      closeStalled(silences, stallMs);
    },
    Math.min(1000, stallMs / 4),
  );
  sweep.unref();
  return () => clearInterval(sweep);
}

/** Each connection waiting for an answer, and since when it has received nothing (as far as sweeps can tell). */
function silencesNow(pool: ConnectionPool, before: Map<PooledConnection, Silence>): Map<PooledConnection, Silence> {
  const now = Date.now();
  const silences = new Map<PooledConnection, Silence>();
  for (let index = 0; index < pool._allConnections.length; index++) {
    const connection = pool._allConnections.get(index);
    if (!connection._command) continue;
    const bytesRead = connection.stream.bytesRead;
    const silence = before.get(connection);
    silences.set(connection, silence?.bytesRead === bytesRead ? silence : { bytesRead, since: now });
  }
  return silences;
}

function closeStalled(silences: Map<PooledConnection, Silence>, stallMs: number): void {
  const now = Date.now();
  for (const [connection, silence] of silences) {
    if (now - silence.since < stallMs) continue;
    silences.delete(connection);
    // The error reaches the command in flight (mysql2 hands a socket error to it); destroy takes the connection
    // out of the pool, which would otherwise hand it out again.
    connection.stream.destroy(new StatementStalled(stallMs));
    connection.destroy();
  }
}
