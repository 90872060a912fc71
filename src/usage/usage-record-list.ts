import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type ListUsageTransactionsRequest,
  type ListUsageTransactionsResponse,
  ListUsageTransactionsResponseSchema,
  UsageRecordSchema,
} from "../../gen/provision/v1/usage_admin_pb.js";
import { readSerially, rowDate, sqlDate } from "../platform/database.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { timeRange } from "../platform/time-range.js";
import { requireUuid } from "../platform/validation.js";
import { fromMicro } from "./usage-amounts.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import { RECORD_KIND } from "./usage-store.js";

/** The usage recorded for an entitlement, newest first; the caller checked that it is the provider's. */
export async function listUsageRecords(
  deps: UsageDependencies,
  entitlementId: string,
  request: ListUsageTransactionsRequest,
): Promise<ListUsageTransactionsResponse> {
  const page = resolvePage(request.pageNumber, request.pageSize);
  const dialect = deps.store.dialect;
  const where = ["r.entitlement_id = ?"];
  const parameters: unknown[] = [entitlementId];
  const narrow = (condition: string, value: unknown) => {
    where.push(condition);
    parameters.push(value);
  };
  if (request.metric) narrow("a.metric_name = ?", request.metric);
  if (request.sessionId) narrow("r.session_id = ?", requireUuid("sessionId", request.sessionId));
  const range = timeRange(request.from, request.to);
  if (range.from) narrow("r.occurred_at >= ?", sqlDate(dialect, range.from));
  if (range.to) narrow("r.occurred_at < ?", sqlDate(dialect, range.to));
  const rows = await readSerially(
    deps.dataSource,
    () =>
      deps.dataSource.query(
        `SELECT r.id, r.session_id, r.asset_id, a.metric_name, ${deps.store.asText("r.transaction_id")} AS transaction_id, r.kind, r.amount, r.occurred_at,
          r.recorded_at, r.period_start, COUNT(*) OVER () AS total_count
        FROM usage_records r JOIN monitored_assets a ON a.id = r.asset_id
        WHERE ${where.join(" AND ")} ORDER BY r.occurred_at DESC, r.id DESC LIMIT ? OFFSET ?`,
        [...parameters, page.pageSize, page.offset],
      ) as Promise<Record<string, unknown>[]>,
  );
  const total = rows.length > 0 ? Number(rows[0].total_count) : await countOf(deps, where, parameters, page.offset);
  return create(ListUsageTransactionsResponseSchema, {
    ...pageInfo(page, total, rows.length),
    items: rows.map(recordOf),
  });
}

async function countOf(deps: UsageDependencies, where: string[], parameters: unknown[], offset: number) {
  if (offset === 0) return 0;
  const [row] = (await readSerially(deps.dataSource, () =>
    deps.dataSource.query(
      `SELECT COUNT(*) AS n FROM usage_records r JOIN monitored_assets a ON a.id = r.asset_id WHERE ${where.join(" AND ")}`,
      parameters,
    ),
  )) as { n: unknown }[];
  return Number(row.n);
}

function recordOf(row: Record<string, unknown>) {
  return create(UsageRecordSchema, {
    id: String(row.id),
    sessionId: String(row.session_id),
    assetId: String(row.asset_id),
    metricName: String(row.metric_name),
    transactionId: row.transaction_id === null ? 0n : BigInt(String(row.transaction_id)),
    kind: Number(row.kind) === RECORD_KIND.preallocation ? "preallocation" : "transaction",
    amount: fromMicro(Number(row.amount)),
    occurredAt: timestampFromDate(rowDate(row.occurred_at) as Date),
    recordedAt: timestampFromDate(rowDate(row.recorded_at) as Date),
    periodStart: timestampFromDate(rowDate(row.period_start) as Date),
  });
}
