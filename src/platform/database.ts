import type { EventEmitter } from "node:events";
import fs from "node:fs";
import path from "node:path";
import type { EntityManager, EntitySchema, MigrationInterface } from "typeorm";
// From their own modules: typeorm's index loads ~100 modules more (CLI, decorators, every repository helper).
import { DataSource } from "typeorm/data-source/DataSource.js";
import { QueryFailedError } from "typeorm/error/QueryFailedError.js";
import type { QueryResult } from "typeorm/query-runner/QueryResult.js";
import { DATABASE_POOL, type DatabaseConfig } from "./config.js";
import { DomainError } from "./errors.js";
import { CommitInDoubt, isConnectionLost } from "./lost-connections.js";
import { type SqlEscaper, SqlTemplates } from "./sql-templates.js";
import { SqliteCommitQueue } from "./sqlite-commit-queue.js";

export type Dialect = "mysql" | "sqlite";

export function createDataSource(
  config: DatabaseConfig,
  entities: EntitySchema[],
  migrations: (new () => MigrationInterface)[],
): DataSource {
  if (config.kind === "mysql") {
    return mysqlDataSource(config.url, config.poolSize ?? DATABASE_POOL.fallback, entities, migrations);
  }
  fs.mkdirSync(path.dirname(config.file), { recursive: true });
  return new DataSource({
    type: "better-sqlite3",
    database: config.file,
    entities,
    migrations,
    migrationsTableName: "schema_migrations",
    prepareDatabase: (db: SqliteConnection) => {
      db.pragma("journal_mode = WAL");
      // Every commit flushed to disk before it returns. Set, not left to the default: this SQLite opens a
      // database already in WAL mode (any restart) at NORMAL, where a commit can be lost to a crash of the machine.
      db.pragma("synchronous = FULL");
      db.pragma("busy_timeout = 5000");
      db.pragma("foreign_keys = ON");
      // SQLite's own LOWER folds only ASCII; case-insensitive filters must fold "É" as MySQL does.
      db.function("lower", { deterministic: true }, (value: unknown) =>
        typeof value === "string" ? value.toLowerCase() : value,
      );
    },
    logging: false,
  });
}

function mysqlDataSource(
  url: string,
  poolSize: number,
  entities: EntitySchema[],
  migrations: (new () => MigrationInterface)[],
): DataSource {
  // mysql2 writes a query's values into its text through this (first called once the source is initialized).
  const queryFormat = (sql: string, values: unknown, timezone: string) => templates.format(sql, values, timezone);
  const source: DataSource = new ReadCommittedDataSource({
    type: "mysql",
    url,
    timezone: "Z",
    charset: "utf8mb4_unicode_ci",
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: false,
    poolSize,
    // For runBatch: several statements of one transaction in one round trip. Values are still escaped.
    multipleStatements: true,
    entities,
    migrations,
    migrationsTableName: "schema_migrations",
    logging: false,
    extra: { queryFormat },
  });
  const templates = new SqlTemplates(mysqlModuleOf(source));
  return source;
}

/** The mysql2 module TypeORM's driver loaded when the data source was made, whose escaper it uses. */
function mysqlModuleOf(source: DataSource): SqlEscaper {
  return (source.driver as unknown as { mysql: SqlEscaper }).mysql;
}

/** Data sources whose pooled connections run every transaction at READ COMMITTED already. */
const readCommittedSessions = new WeakSet<DataSource>();
/** MySQL data sources whose server is MariaDB (read when they connect): some locking clauses are spelled apart. */
const mariaDbSources = new WeakSet<DataSource>();
/** MySQL data sources' server-wide lock-wait timeout (`innodb_lock_wait_timeout`, seconds), read when they connect. */
const serverLockWaits = new WeakMap<DataSource, number>();
const READ_COMMITTED_SESSION = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

interface PooledConnection {
  query(sql: string, done: (error: Error | null) => void): unknown;
  destroy(): void;
}

/**
 * MySQL data source whose pooled connections are set to READ COMMITTED once, at their first use, instead of by
 * one more round trip at the start of each transaction. A connection that cannot be set is destroyed, so the
 * statement queued behind it fails rather than run at another level.
 */
class ReadCommittedDataSource extends DataSource {
  override async initialize(): Promise<this> {
    await super.initialize();
    const pool = (this.driver as unknown as { pool: EventEmitter }).pool;
    const prepared = new WeakSet<PooledConnection>();
    pool.on("acquire", (connection: PooledConnection) => {
      if (prepared.has(connection)) return;
      prepared.add(connection);
      connection.query(READ_COMMITTED_SESSION, (error) => {
        if (error) connection.destroy();
      });
    });
    readCommittedSessions.add(this);
    const [server] = (await this.query(
      "SELECT VERSION() AS version, @@GLOBAL.innodb_lock_wait_timeout AS lockWaitSeconds",
    )) as { version: string; lockWaitSeconds: number | string }[];
    if (isMariaDb(server.version)) mariaDbSources.add(this);
    serverLockWaits.set(this, Number(server.lockWaitSeconds));
    return this;
  }
}

interface SqliteConnection {
  pragma(statement: string): unknown;
  function(name: string, options: { deterministic: boolean }, implementation: (value: unknown) => unknown): unknown;
}

/**
 * Connection failures worth another try at start-up: a handshake cut short, or a server full. Not a connection
 * timeout (ETIMEDOUT): a server silent for mysql2's 10 s would make four tries take 40 s.
 */
const TRANSIENT_CONNECT_ERRORS = new Set(["ECONNRESET", "PROTOCOL_CONNECTION_LOST", "ER_CON_COUNT_ERROR"]);
const CONNECT_ATTEMPTS = 4;

/**
 * Initializes `dataSource` (TypeORM metadata, then a first connection), trying again after a transient failure
 * (about 1.5 s in all); fails naming DATABASE_URL. A refused connection fails at once, a silent server after 10 s.
 */
export async function connectDatabase(dataSource: DataSource): Promise<DataSource> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await dataSource.initialize();
    } catch (error) {
      const code = (error as { code?: string }).code ?? "";
      if (attempt >= CONNECT_ATTEMPTS || !TRANSIENT_CONNECT_ERRORS.has(code)) {
        throw new Error(`DATABASE_URL is unreachable: ${(error as Error).message}`);
      }
      await dataSource.driver.disconnect().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

export function dialectOf(dataSource: DataSource): Dialect {
  return dataSource.options.type === "mysql" ? "mysql" : "sqlite";
}

/** A SELECT's row-lock clause: ` FOR UPDATE` on MySQL; none on SQLite, whose write transactions run one at a time. */
export function forUpdate(dialect: Dialect): string {
  return dialect === "mysql" ? " FOR UPDATE" : "";
}

/** Applies pending migrations, one instance at a time; returns the names of those applied. */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  return withDatabaseLock(dataSource, "provision-migrations", async () => {
    const applied = await dataSource.runMigrations({ transaction: "each" });
    return applied.map((migration) => migration.name);
  });
}

/**
 * Runs `work` while holding a named lock across every instance on the database (MySQL `GET_LOCK`);
 * SQLite serves one instance, so it runs at once there.
 */
export async function withDatabaseLock<T>(dataSource: DataSource, name: string, work: () => Promise<T>): Promise<T> {
  if (dialectOf(dataSource) !== "mysql") return work();
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    const [row] = (await runner.query("SELECT GET_LOCK(?, 60) AS acquired", [name])) as { acquired: number }[];
    if (Number(row?.acquired) !== 1) throw new Error(`could not take the ${name} lock within 60 s`);
    try {
      return await work();
    } finally {
      await runner.query("SELECT RELEASE_LOCK(?)", [name]);
    }
  } finally {
    await runner.release();
  }
}

export async function pingDatabase(dataSource: DataSource): Promise<void> {
  await dataSource.query("SELECT 1");
}

/** Whether `error` is a unique-constraint violation, on MySQL/MariaDB or SQLite. */
export function isUniqueViolation(error: unknown): error is QueryFailedError {
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = error.driverError as { code?: string; errno?: number };
  return (
    driverError?.errno === 1062 ||
    driverError?.code === "ER_DUP_ENTRY" ||
    driverError?.code === "SQLITE_CONSTRAINT_UNIQUE" ||
    driverError?.code === "SQLITE_CONSTRAINT_PRIMARYKEY"
  );
}

const sqliteQueues = new WeakMap<DataSource, SqliteCommitQueue>();

function sqliteQueueOf(dataSource: DataSource): SqliteCommitQueue {
  let queue = sqliteQueues.get(dataSource);
  if (!queue) {
    queue = new SqliteCommitQueue(dataSource);
    sqliteQueues.set(dataSource, queue);
  }
  return queue;
}

/**
 * Runs a write alone on SQLite. TypeORM gives every transaction of a better-sqlite3 data source the same
 * connection, so two writes at once would share (and roll back) each other's transaction; queued, each keeps its
 * own (a savepoint), and the writes queued behind one another share one flush to disk (see SqliteCommitQueue):
 * the answer comes once the write is durable. MySQL has a pool and row locks: the write runs at once.
 */
export function writeSerially<T>(
  dataSource: DataSource,
  work: () => Promise<T>,
  options: WriteOptions = {},
): Promise<T> {
  if (dialectOf(dataSource) !== "sqlite") return work();
  return sqliteQueueOf(dataSource).run(work, { write: true, gathered: options.gathered });
}

export interface WriteOptions {
  /**
   * The write is a group commit of its own (many callers' rows, see GroupCommit): on SQLite it is committed as
   * soon as it is done instead of at the end of the event loop's turn with the writes queued beside it.
   */
  gathered?: boolean;
}

/**
 * Runs a read in the same queue as the writes on SQLite: a write that yields between chunks keeps its
 * transaction open on the one shared connection, and a read run meanwhile would see its unfinished rows. The read
 * is answered as soon as it ran, not after the commit the writes before it share.
 */
export function readSerially<T>(dataSource: DataSource, work: () => Promise<T>): Promise<T> {
  if (dialectOf(dataSource) !== "sqlite") return work();
  return sqliteQueueOf(dataSource).run(work, { write: false });
}

/** Lets the event loop serve other requests between the chunks of a long write on SQLite (a no-op on MySQL). */
export function yieldToEventLoop(dataSource: DataSource): Promise<void> {
  if (dialectOf(dataSource) !== "sqlite") return Promise.resolve();
  return new Promise((resolve) => setImmediate(resolve));
}

const DEADLOCK_ATTEMPTS = 5;

/**
 * One transaction: its writes all land or none do. On MySQL it runs at READ COMMITTED, so a lookup of a row
 * that does not exist takes no gap lock for concurrent inserts to deadlock on; a transaction chosen as a
 * deadlock victim is run again, five times in all, and then answers 503, as does one timed out waiting for a lock.
 */
export async function inTransaction<T>(
  dataSource: DataSource,
  work: (manager: EntityManager) => Promise<T>,
  options: WriteOptions = {},
): Promise<T> {
  const run =
    dialectOf(dataSource) === "mysql"
      ? () => onMysql(dataSource, work)
      : () => writeSerially(dataSource, () => dataSource.transaction(work), options);
  return retryingLockConflicts(run);
}

/** A MySQL transaction as TypeORM runs it; its connection lost once the COMMIT was sent throws CommitInDoubt. */
async function onMysql<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  const startedAt = Date.now();
  let committingOn: number | undefined;
  const workThenCommit = async (manager: EntityManager) => {
    const result = await work(manager);
    committingOn = threadIdOf(manager);
    return result;
  };
  try {
    return readCommittedSessions.has(dataSource)
      ? await dataSource.transaction(workThenCommit)
      : await dataSource.transaction("READ COMMITTED", workThenCommit);
  } catch (error) {
    if (committingOn !== undefined && isConnectionLost(error)) throw new CommitInDoubt(committingOn, startedAt);
    throw error;
  }
}

/**
 * How long a MySQL statement may wait with nothing received before its connection is taken as lost (see
 * watchStalledStatements): `configuredSeconds`, else 10 s past the server's lock-wait timeout, the longest a
 * statement waits for a row lock.
 */
export function statementStallMs(dataSource: DataSource, configuredSeconds?: number): number {
  return (configuredSeconds ?? (serverLockWaits.get(dataSource) ?? 50) + 10) * 1000;
}

/** MySQL's id of the connection a transaction's manager runs on. */
export function threadIdOf(manager: EntityManager): number | undefined {
  const runner = manager.queryRunner as unknown as { databaseConnection?: { threadId?: number } } | undefined;
  return runner?.databaseConnection?.threadId;
}

/** Whether the data source's pooled connections run every transaction at READ COMMITTED already. */
export function readCommittedAlready(dataSource: DataSource): boolean {
  return readCommittedSessions.has(dataSource);
}

const DATABASE_BUSY = "database-busy";

/**
 * Runs a transaction again when it was chosen as a deadlock victim, five times in all, and then answers 503. One
 * that timed out waiting for a lock answers 503 at once: it has waited the server's whole `innodb_lock_wait_timeout`
 * (50 s by default) for a lock some transaction holds that long, and a client waiting for it has likely given up.
 */
export async function retryingLockConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (isLockWaitTimeout(error) || (isDeadlock(error) && attempt >= DEADLOCK_ATTEMPTS)) throw databaseBusy();
      if (!isDeadlock(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10 * attempt + Math.random() * 20 * attempt));
    }
  }
}

/** 503 `database-busy`: a lock held by other transactions for the whole lock-wait timeout. */
export function databaseBusy(): DomainError {
  return new DomainError("unavailable", "the database is busy with conflicting writes; try again", {
    slug: DATABASE_BUSY,
    headers: { "retry-after": "1" },
  });
}

/** Whether the error is retryingLockConflicts' answer once its attempts are spent. */
export function isDatabaseBusy(error: unknown): boolean {
  return error instanceof DomainError && error.slug === DATABASE_BUSY;
}

function isDeadlock(error: unknown): boolean {
  return mysqlErrno(error) === 1213;
}

/** MySQL's ER_LOCK_WAIT_TIMEOUT: the statement (not its transaction) was rolled back. */
export function isLockWaitTimeout(error: unknown): boolean {
  return mysqlErrno(error) === 1205;
}

function mysqlErrno(error: unknown): number | undefined {
  if (!(error instanceof QueryFailedError)) return undefined;
  return (error.driverError as { errno?: number })?.errno;
}

/**
 * A locking read that passes over rows another transaction holds (MySQL 8.0.1+, MariaDB 10.6+), so that
 * workers on several instances claim different rows at once; SQLite runs one write transaction at a time.
 */
export function forUpdateSkipLocked(dialect: Dialect): string {
  return dialect === "mysql" ? " FOR UPDATE SKIP LOCKED" : "";
}

/** A Date as a raw query's parameter: stored as TypeORM stores `datetime` columns (UTC text on SQLite). */
export function sqlDate(dialect: Dialect, value: Date): Date | string {
  return dialect === "mysql" ? value : value.toISOString().replace("T", " ").replace("Z", "");
}

/** A boolean as a raw query's parameter: TINYINT(1) takes true/false on MySQL; SQLite binds only 1 and 0. */
export function sqlBool(dialect: Dialect, value: boolean): boolean | number {
  return dialect === "mysql" ? value : value ? 1 : 0;
}

/** The smaller of two SQL values: MySQL's LEAST is SQLite's MIN of two arguments. */
export function sqlLeast(dialect: Dialect, a: string, b: string): string {
  return `${dialect === "mysql" ? "LEAST" : "MIN"}(${a}, ${b})`;
}

/** The larger of two SQL values: MySQL's GREATEST is SQLite's MAX of two arguments. */
export function sqlGreatest(dialect: Dialect, a: string, b: string): string {
  return `${dialect === "mysql" ? "GREATEST" : "MAX"}(${a}, ${b})`;
}

/** A `datetime` column of a raw result row (a Date from MySQL, UTC text from SQLite) as a Date; null stays null. */
export function rowDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  return new Date(`${String(value).replace(" ", "T")}Z`);
}

/** `LOCK IN SHARE MODE` on MySQL/MariaDB (both read it); none on SQLite, whose writes run one at a time. */
export function forShare(dialect: Dialect): string {
  return dialect === "mysql" ? " LOCK IN SHARE MODE" : "";
}

/**
 * A share lock passing over rows another transaction holds exclusively: MariaDB (10.6+) reads only `LOCK IN SHARE
 * MODE SKIP LOCKED`, MySQL (8.0.1+) only `FOR SHARE SKIP LOCKED`; none on SQLite.
 */
export function forShareSkipLocked(dataSource: DataSource): string {
  if (dialectOf(dataSource) !== "mysql") return "";
  return shareSkipLockedOn(mariaDbSources.has(dataSource) ? "mariadb" : "mysql");
}

export function shareSkipLockedOn(server: "mariadb" | "mysql"): string {
  return server === "mariadb" ? " LOCK IN SHARE MODE SKIP LOCKED" : " FOR SHARE SKIP LOCKED";
}

/** Whether a server's `VERSION()` names MariaDB (`10.11.19-MariaDB-0+deb12u1`; MySQL's is `8.0.36`). */
export function isMariaDb(version: string): boolean {
  return /mariadb/i.test(version);
}

/** `INSERT IGNORE` (MySQL) or `INSERT OR IGNORE` (SQLite): rows whose unique key exists already are skipped. */
export function insertIgnore(dialect: Dialect): string {
  return dialect === "mysql" ? "INSERT IGNORE" : "INSERT OR IGNORE";
}

/** Runs an INSERT, UPDATE or DELETE and answers the rows it changed (inserted, for INSERT IGNORE), on either driver. */
export async function changedRows(manager: EntityManager, sql: string, parameters: unknown[]): Promise<number> {
  const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    const result = (await runner.query(sql, parameters, true)) as QueryResult;
    return result.affected ?? 0;
  } finally {
    if (!manager.queryRunner) await runner.release();
  }
}
