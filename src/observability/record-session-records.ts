import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type RecordLogsRequest,
  type RecordLogsResponse,
  RecordLogsResponseSchema,
  type RecordMetricsRequest,
  type RecordMetricsResponse,
  RecordMetricsResponseSchema,
} from "../../gen/provision/v1/observability_pb.js";
import type { SessionEvent } from "../../gen/provision/v1/session_event_pb.js";
import { liveSessionOfCall } from "../licensing/live-session.js";
import { requireUuid } from "../platform/validation.js";
import { logEntries } from "./log-entries.js";
import { metricSamples } from "./metric-samples.js";
import type { ObservabilityDependencies } from "./observability-dependencies.js";
import { recordsOfEvents, type SessionRecordKind } from "./session-events.js";
import type { SessionRecordWriter } from "./session-record-writer.js";

/** Stores a batch of log entries; answers how many were new. */
export async function recordLogs(
  deps: ObservabilityDependencies,
  request: RecordLogsRequest,
  context: HandlerContext,
): Promise<RecordLogsResponse> {
  const acceptedCount = await record(deps, deps.logs, logEntries, request, context);
  return create(RecordLogsResponseSchema, { acceptedCount });
}

/** Stores a batch of metric samples; answers how many were new. */
export async function recordMetrics(
  deps: ObservabilityDependencies,
  request: RecordMetricsRequest,
  context: HandlerContext,
): Promise<RecordMetricsResponse> {
  const acceptedCount = await record(deps, deps.metrics, metricSamples, request, context);
  return create(RecordMetricsResponseSchema, { acceptedCount });
}

async function record(
  deps: ObservabilityDependencies,
  writer: SessionRecordWriter,
  kind: SessionRecordKind,
  request: { sessionId: string; events: SessionEvent[] },
  context: HandlerContext,
): Promise<number> {
  const sessionId = requireUuid("sessionId", request.sessionId);
  const session = await liveSessionOfCall(deps.sessions, sessionId, context);
  return writer.write(recordsOfEvents(kind, request.events, session, deps.clock.now()));
}
