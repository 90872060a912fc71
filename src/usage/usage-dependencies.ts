import type { DataSource } from "typeorm";
import type { LiveSessions } from "../licensing/live-session.js";
import type { ObservabilityReads } from "../observability/observability-dependencies.js";
import type { Clock } from "../platform/clock.js";
import type { KeyedTurns } from "../platform/keyed-turns.js";
import type { Logger } from "../platform/logger.js";
import type { Semaphore } from "../platform/semaphore.js";
import type { GrantWriter } from "./grant-writer.js";
import type { MeterCounters } from "./meter-counters.js";
import type { UsageBalanceStore } from "./usage-balance-store.js";
import type { UsageDirectory } from "./usage-directory.js";
import type { UsageStatusEvents } from "./usage-status-events.js";
import type { UsageStore } from "./usage-store.js";

/** What the runtime usage calls (usage transactions, pre-allocation) are built from. */
export interface UsageDependencies {
  dataSource: DataSource;
  clock: Clock;
  logger: Logger;
  store: UsageStore;
  balances: UsageBalanceStore;
  directory: UsageDirectory;
  counters: MeterCounters;
  statusEvents: UsageStatusEvents;
  grants: GrantWriter;
  /** Usage batches waiting for a period's row another transaction holds, a few at a time per entitlement. */
  heldPeriodTurns: KeyedTurns;
  /** Usage batches written at once otherwise. */
  batchTurns: Semaphore;
  /** Whether a session is still live (a released or ended session's token is refused). */
  sessions: LiveSessions;
}

/** What the vendor-side usage reports and top-ups are built from. */
export interface UsageAdminDependencies extends UsageDependencies {
  /** Logs, metrics and ratings sent by sessions. */
  observability: ObservabilityReads;
}
