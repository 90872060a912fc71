import type { DataSource, EntitySubscriberInterface } from "typeorm";

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

/** The parts of mysql2's pooled connection the watch uses. */
interface PooledConnection {
  stream: { bytesRead: number; destroy(error?: Error): void };
  /** Takes the connection out of its pool and closes it. */
  destroy(): void;
}

interface Watch {
  /** Statements sent and not answered yet. */
  pending: number;
  bytesRead: number;
  quietSince: number;
}

/**
 * Closes a MySQL connection whose statements wait longer than `stallMs` with nothing received: a network that
 * went silent (a partition, a host gone without a reset) would otherwise hold the statement, its request and its
 * pooled connection until TCP gives up, about fifteen minutes later. Its statements fail as a lost connection
 * and the pool makes a new one. Answers the watch's stop.
 */
export function watchStalledStatements(dataSource: DataSource, stallMs: number): () => void {
  const watches = new Map<PooledConnection, Watch>();
  const connectionOf = (queryRunner: unknown) =>
    (queryRunner as { databaseConnection?: PooledConnection }).databaseConnection;
  const subscriber: EntitySubscriberInterface = {
    beforeQuery(event) {
      const connection = connectionOf(event.queryRunner);
      if (!connection) return;
      const watch = watches.get(connection);
      if (watch) watch.pending++;
      else watches.set(connection, { pending: 1, bytesRead: connection.stream.bytesRead, quietSince: Date.now() });
    },
    afterQuery(event) {
      const connection = connectionOf(event.queryRunner);
      const watch = connection && watches.get(connection);
      if (watch && --watch.pending === 0) watches.delete(connection);
    },
  };
  dataSource.subscribers.push(subscriber);
  const sweep = setInterval(() => closeStalled(watches, stallMs), Math.min(1000, stallMs / 4));
  sweep.unref();
  return () => {
    clearInterval(sweep);
    dataSource.subscribers.splice(dataSource.subscribers.indexOf(subscriber), 1);
  };
}

function closeStalled(watches: Map<PooledConnection, Watch>, stallMs: number): void {
  const now = Date.now();
  for (const [connection, watch] of watches) {
    const bytesRead = connection.stream.bytesRead;
    if (bytesRead !== watch.bytesRead) {
      watch.bytesRead = bytesRead;
      watch.quietSince = now;
    } else if (now - watch.quietSince >= stallMs) {
      watches.delete(connection);
      // The error reaches the pending statements (mysql2 hands a socket error to the command in flight); destroy
      // keeps the pool from handing the connection out again.
      connection.stream.destroy(new StatementStalled(stallMs));
      connection.destroy();
    }
  }
}
