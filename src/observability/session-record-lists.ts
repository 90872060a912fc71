import { create } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type ListSessionLogsRequest,
  type ListSessionLogsResponse,
  ListSessionLogsResponseSchema,
  type ListSessionMetricsRequest,
  type ListSessionMetricsResponse,
  ListSessionMetricsResponseSchema,
} from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially } from "../platform/database.js";
import { invalidField, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { timeRange } from "../platform/time-range.js";
import { requireUuid } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { LOG_LEVELS, logLevelOf } from "./log-entries.js";
import { isMetricName } from "./metric-samples.js";
import type { ObservabilityReads } from "./observability-dependencies.js";
import { toSessionRecord } from "./session-record-mapper.js";
import type { SessionRecordStore } from "./session-record-store.js";

/** A session's log entries, newest first; `level` selects one level. */
export async function listSessionLogs(
  deps: ObservabilityReads,
  request: ListSessionLogsRequest,
  context: HandlerContext,
): Promise<ListSessionLogsResponse> {
  const level = request.level === "" ? "" : logLevelOf(request.level);
  if (level === undefined) throw invalidField("level", `must be one of ${LOG_LEVELS.join(", ")}`);
  const page = await listRecords(deps, deps.logs, { ...request, eventName: level }, context);
  return create(ListSessionLogsResponseSchema, page);
}

/** A session's metric samples, newest first; `name` selects one metric. */
export async function listSessionMetrics(
  deps: ObservabilityReads,
  request: ListSessionMetricsRequest,
  context: HandlerContext,
): Promise<ListSessionMetricsResponse> {
  if (request.name !== "" && !isMetricName(request.name)) throw invalidField("name", "must be a metric name");
  const page = await listRecords(deps, deps.metrics, { ...request, eventName: request.name }, context);
  return create(ListSessionMetricsResponseSchema, page);
}

interface RecordListRequest {
  sessionId: string;
  pageNumber: number;
  pageSize: number;
  eventName: string;
  from?: Timestamp;
  to?: Timestamp;
}

/** A page of one of the provider's sessions' records; another provider's session answers 404. */
async function listRecords(
  deps: ObservabilityReads,
  records: SessionRecordStore,
  request: RecordListRequest,
  context: HandlerContext,
) {
  const sessionId = requireUuid("sessionId", request.sessionId);
  const page = resolvePage(request.pageNumber, request.pageSize);
  const range = timeRange(request.from, request.to);
  const providerId = providerOf(context);
  const { dataSource, sessions } = deps;
  const { rows, total } = await readSerially(dataSource, async () => {
    const session = await sessions.findSession(dataSource.manager, sessionId);
    if (session?.providerId !== providerId) throw notFound("session", sessionId);
    return records.page(dataSource.manager, {
      sessionId,
      eventName: request.eventName,
      ...range,
      offset: page.offset,
      limit: page.pageSize,
    });
  });
  return { ...pageInfo(page, total, rows.length), items: rows.map(toSessionRecord) };
}
