import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import anyTest, { type TestFn } from "ava";
import { DataSource, QueryFailedError } from "typeorm";
import { createLogger } from "../../src/platform/logger.js";
import { createTestDatabase } from "../support/test-server.js";

const test = anyTest as TestFn<{ dataSource: DataSource; drop(): Promise<void> }>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.dataSource = await new DataSource({ type: "mysql", url: database.url }).initialize();
  await t.context.dataSource.query("CREATE TABLE clients (id VARCHAR(8) PRIMARY KEY, secret_hash VARCHAR(8) NOT NULL)");
});

test.after.always(async (t) => {
  await t.context.dataSource?.destroy();
  await t.context.drop?.();
});

/** A logger writing into an array of parsed records, as the server's does into stdout. */
function capturingLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  });
  return { logger: createLogger("info", sink), lines };
}

/** A real failed query whose parameters hold a secret-looking value: it does not fit its column. */
async function failedRotation(dataSource: DataSource, secretHash: string): Promise<QueryFailedError> {
  const runner = dataSource.createQueryRunner();
  try {
    // Strict whatever the server's default, so that too long a value is an error rather than a warning.
    await runner.query("SET SESSION sql_mode = 'STRICT_ALL_TABLES'");
    await runner.query("INSERT INTO clients (id, secret_hash) VALUES (?, ?)", [randomBytes(3).toString("hex"), "old"]);
    const failure = await runner
      .query("UPDATE clients SET secret_hash = ? WHERE id <> ?", [secretHash, "none"])
      .catch((error: unknown) => error);
    if (!(failure instanceof QueryFailedError)) throw new Error(`expected a QueryFailedError, got ${failure}`);
    return failure;
  } finally {
    await runner.release();
  }
}

test("a logged QueryFailedError keeps what identifies the failure and drops the query and its values", async (t) => {
  const secretHash = `scrypt$${randomBytes(24).toString("base64url")}`;
  const failure = await failedRotation(t.context.dataSource, secretHash);
  t.true(JSON.stringify(failure).includes(secretHash), "the error itself carries the secret: the test can fail");

  const { logger, lines } = capturingLogger();
  logger.error({ err: failure }, "rotating the secret failed");
  logger.error(failure, "logged as the error itself");
  logger.warn({ error: failure }, "logged under `error`");
  t.is(lines.length, 3);
  for (const line of lines) {
    t.false(line.includes(secretHash), line);
    t.false(line.includes("UPDATE clients"), "no query text");
  }
  const [record] = lines.map((line) => JSON.parse(line));
  t.like(record.err, {
    type: "QueryFailedError",
    name: "QueryFailedError",
    code: "ER_DATA_TOO_LONG",
    errno: 1406,
    sqlState: "22001",
  });
  t.regex(record.err.message, /too long/i);
  t.regex(record.err.stack, /QueryFailedError/);
  t.deepEqual(Object.keys(record.err).sort(), ["code", "errno", "message", "name", "sqlState", "stack", "type"]);
});

test("a QueryFailedError as the cause of another error is dropped to the same fields", async (t) => {
  const secretHash = `scrypt$${randomBytes(24).toString("base64url")}`;
  const failure = await failedRotation(t.context.dataSource, secretHash);
  const { logger, lines } = capturingLogger();
  logger.error({ err: new Error("rotation failed", { cause: failure }) }, "rotating the secret failed");
  t.false(lines[0].includes(secretHash), lines[0]);
  t.like(JSON.parse(lines[0]).err, { message: "rotation failed", cause: { code: "ER_DATA_TOO_LONG" } });
});

test("plain error records are logged as they were", (t) => {
  const { logger, lines } = capturingLogger();
  logger.warn({ err: { message: "redis is not connected" } }, "token rate limit skipped");
  t.deepEqual(JSON.parse(lines[0]).err, { message: "redis is not connected" });
});
