import type { DataSource } from "typeorm";
import type { LiveSessions } from "../licensing/live-session.js";
import type { SessionStore } from "../licensing/session-store.js";
import type { Clock } from "../platform/clock.js";
import { SessionLogEntity, SessionMetricEntity } from "./entities.js";
import { RatingStore } from "./rating-store.js";
import { SessionRecordStore } from "./session-record-store.js";
import { SessionRecordWriter } from "./session-record-writer.js";

/** What the session calls of ObservabilityService and FeedbackService are built from. */
export interface ObservabilityDependencies {
  dataSource: DataSource;
  clock: Clock;
  newId: () => string;
  sessions: LiveSessions;
  logs: SessionRecordWriter;
  metrics: SessionRecordWriter;
  ratings: RatingStore;
}

/** What vendors read back of logs, metrics and ratings (UsageAdminService). */
export interface ObservabilityReads {
  dataSource: DataSource;
  sessions: SessionStore;
  logs: SessionRecordStore;
  metrics: SessionRecordStore;
  ratings: RatingStore;
}

/** The observability parts, built once per instance over licensing's session cache. */
export function createObservability(options: { clock: Clock; newId: () => string; sessions: LiveSessions }): {
  dependencies: ObservabilityDependencies;
  reads: ObservabilityReads;
} {
  const { dataSource } = options.sessions;
  const logs = new SessionRecordStore(dataSource, SessionLogEntity);
  const metrics = new SessionRecordStore(dataSource, SessionMetricEntity);
  const ratings = new RatingStore(dataSource);
  return {
    dependencies: {
      ...options,
      dataSource,
      logs: new SessionRecordWriter(dataSource, logs),
      metrics: new SessionRecordWriter(dataSource, metrics),
      ratings,
    },
    reads: { dataSource, sessions: options.sessions.store, logs, metrics, ratings },
  };
}
