import type { DataSource } from "typeorm";
import type { MysqlDriver } from "typeorm/driver/mysql/MysqlDriver.js";
import { QueryFailedError } from "typeorm/error/QueryFailedError.js";

/** The part of a mysql2 pool connection used here. */
interface PooledConnection {
  execute(sql: string, values: unknown[], callback: (error: Error | null, result: unknown) => void): unknown;
  release(): void;
}

/**
 * Runs one statement that needs no transaction. On MySQL it is a prepared statement on one of the pool's
 * connections: mysql2 keeps it per connection, so the server parses it once, and the parameters travel in
 * binary rather than escaped into the SQL text (TypeORM's `query` does that, and the server parses each call
 * anew). It fails with TypeORM's QueryFailedError, as `dataSource.query` does; SQLite runs it through that.
 */
export async function runStandalone(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<unknown> {
  if (dataSource.options.type !== "mysql") return dataSource.query(sql, parameters);
  const connection = (await (dataSource.driver as MysqlDriver).obtainMasterConnection()) as PooledConnection;
  try {
    return await new Promise((resolve, reject) => {
      connection.execute(sql, parameters, (error, result) =>
        error ? reject(new QueryFailedError(sql, parameters, error)) : resolve(result),
      );
    });
  } finally {
    connection.release();
  }
}
