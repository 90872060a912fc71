import mysql from "mysql2";

/**
 * Counts the queries this process sends to MySQL (every mysql2 connection, so every in-process test server)
 * whose SQL text holds `fragment` (or matches it): a multi-statement batch is one query, one round trip. Answers
 * the count so far.
 */
export function countMysqlQueries(fragment: string | RegExp): () => number {
  let count = 0;
  const query = mysql.Connection.prototype.query as (...args: unknown[]) => unknown;
  mysql.Connection.prototype.query = function countedQuery(this: unknown, ...args: unknown[]) {
    const sql = typeof args[0] === "string" ? args[0] : (args[0] as { sql?: string } | undefined)?.sql;
    if (sql !== undefined && (typeof fragment === "string" ? sql.includes(fragment) : fragment.test(sql))) count++;
    return query.apply(this, args);
  } as typeof mysql.Connection.prototype.query;
  return () => count;
}
