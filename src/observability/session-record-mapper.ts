import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type SessionRecord, SessionRecordSchema } from "../../gen/provision/v1/usage_admin_pb.js";
import type { ListedSessionRecord } from "./session-record-store.js";

export function toSessionRecord(row: ListedSessionRecord): SessionRecord {
  return create(SessionRecordSchema, {
    id: row.id,
    sessionId: row.sessionId,
    transactionId: BigInt(row.transactionId ?? 0),
    eventName: row.eventName,
    eventData: row.eventData,
    occurredAt: timestampFromDate(row.occurredAt),
    recordedAt: timestampFromDate(row.recordedAt),
  });
}
