import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type LicenseSession,
  LicenseSessionSchema,
  LicenseSessionState,
} from "../../gen/provision/v1/entitlement_pb.js";
import { type LicenseSessionRow, SESSION_STATE } from "./entities.js";

export function sessionStateAt(row: LicenseSessionRow, now: Date): LicenseSessionState {
  if (row.state === SESSION_STATE.released) return LicenseSessionState.RELEASED;
  if (row.state === SESSION_STATE.ended) return LicenseSessionState.ENDED;
  return row.graceEndsAt > now ? LicenseSessionState.LIVE : LicenseSessionState.LAPSED;
}

export function toLicenseSession(row: LicenseSessionRow, now: Date): LicenseSession {
  return create(LicenseSessionSchema, {
    id: row.id,
    entitlementId: row.entitlementId,
    activationCodeId: row.activationCodeId,
    fingerprint: row.fingerprint,
    state: sessionStateAt(row, now),
    activatedAt: timestampFromDate(row.activatedAt),
    leaseExpiresAt: timestampFromDate(row.leaseExpiresAt),
    graceEndsAt: timestampFromDate(row.graceEndsAt),
    lastCheckInAt: timestampFromDate(row.lastCheckInAt),
    softwareVersion: row.softwareVersion,
    clientAddress: row.clientAddress,
    endedAt: row.endedAt ? timestampFromDate(row.endedAt) : undefined,
    isFloating: row.isFloating,
  });
}
