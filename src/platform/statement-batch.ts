import type { EntityManager } from "typeorm";

/** One SQL statement and its parameters, to run in a batch. */
export interface Statement {
  sql: string;
  parameters: unknown[];
}

/**
 * Runs statements in order in the manager's transaction and answers each one's result (rows of a SELECT, the
 * driver's write result otherwise). On MySQL they travel together, as one multi-statement query: one round trip
 * instead of one each. Its values are still escaped by the driver, statement by statement. SQLite runs them one
 * after another. A statement that fails fails the batch, and those after it do not run.
 */
export async function runBatch(manager: EntityManager, statements: Statement[]): Promise<unknown[]> {
  if (statements.length === 0) return [];
  if (statements.length === 1 || manager.connection.options.type !== "mysql") {
    const results: unknown[] = [];
    for (const statement of statements) results.push(await manager.query(statement.sql, statement.parameters));
    return results;
  }
  return (await manager.query(
    statements.map((statement) => statement.sql).join(";\n"),
    statements.flatMap((statement) => statement.parameters),
  )) as unknown[];
}
