import type { DataSource } from "typeorm";
import type { LiveSessions } from "../licensing/live-session.js";
import type { Clock } from "../platform/clock.js";
import type { Coordinator } from "../platform/coordinator.js";
import { dialectOf } from "../platform/database.js";
import { SYNCHRONOUS_GATHER_TURNS } from "../platform/group-commit.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import { KeyedTurns } from "../platform/keyed-turns.js";
import type { Logger } from "../platform/logger.js";
import { Semaphore } from "../platform/semaphore.js";
import type { Outbox } from "../webhooks/outbox.js";
import { autoBalanceJob } from "./auto-balance-job.js";
import { counterRecountJob } from "./counter-recount-job.js";
import { GrantWriter } from "./grant-writer.js";
import { guardedMeters } from "./guarded-meters.js";
import { MeterCounters } from "./meter-counters.js";
import { periodRolloverJob } from "./period-rollover-job.js";
import { statusRecheckJob } from "./status-recheck-job.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import { UsageDirectory } from "./usage-directory.js";
import { UsageStatusEvents } from "./usage-status-events.js";
import { UsageStore } from "./usage-store.js";

/**
 * Usage batches that wait on a period's row held elsewhere (a rebuild, a top-up, an operator's session) each hold a
 * connection: this many at a time for one entitlement, and for all, so that they cannot take the pool.
 */
const HELD_PERIOD_TURNS = { each: 2, overall: 2 };
/**
 * Usage batch transactions at once on an instance on MySQL (the others wait in memory): each writes hundreds of
 * rows, and more at once only contend in InnoDB (ingest ran about 12 % slower with 16 than with 10). SQLite writes
 * one at a time anyway, and a bound would only keep batches out of the commit they could share.
 */
const BATCHES_AT_ONCE = { mysql: 8, sqlite: Number.POSITIVE_INFINITY };

/** Metering's parts, built once per instance. */
export async function createUsage(options: {
  dataSource: DataSource;
  clock: Clock;
  logger: Logger;
  bus: InvalidationBus;
  coordinator: Coordinator;
  /** The webhook outbox overage and balance events are written to. */
  events: Outbox;
  sessions: LiveSessions;
}) {
  const { dataSource, clock, logger } = options;
  const store = new UsageStore(dataSource);
  const directory = await UsageDirectory.create(store, options.bus, clock);
  const meters = guardedMeters(options.coordinator.meters, logger);
  const counters = new MeterCounters(store, meters, clock);
  const statusEvents = new UsageStatusEvents(dataSource, store, options.events, clock, logger);
  // SQLite has one writer: a second transaction in flight would only wait for the first.
  const onMysql = dialectOf(dataSource) === "mysql";
  const grants = new GrantWriter({
    dataSource,
    store,
    meters,
    statusEvents,
    logger,
    rebuild: (ref) => counters.rebuild(ref),
    maxInFlight: onMysql ? 2 : 1,
    gatherTurns: onMysql ? undefined : SYNCHRONOUS_GATHER_TURNS,
  });
  const dependencies: UsageDependencies = {
    dataSource,
    clock,
    logger,
    store,
    balances: store.balances,
    directory,
    counters,
    statusEvents,
    grants,
    heldPeriodTurns: new KeyedTurns(HELD_PERIOD_TURNS.each, HELD_PERIOD_TURNS.overall),
    batchTurns: new Semaphore(onMysql ? BATCHES_AT_ONCE.mysql : BATCHES_AT_ONCE.sqlite),
    sessions: options.sessions,
  };
  return {
    dependencies,
    jobs: [
      autoBalanceJob(dependencies),
      periodRolloverJob(dependencies),
      statusRecheckJob(dependencies),
      counterRecountJob(dependencies),
    ],
    close: () => close(grants, statusEvents),
  };
}

async function close(grants: GrantWriter, statusEvents: UsageStatusEvents): Promise<void> {
  await grants.close();
  statusEvents.close();
}
