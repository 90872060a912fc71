import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "typeorm";
import {
  type EndSessionRequest,
  type EndSessionResponse,
  EndSessionResponseSchema,
  type ListSessionsRequest,
  type ListSessionsResponse,
  ListSessionsResponseSchema,
} from "../../gen/provision/v1/entitlement_pb.js";
import { readSerially } from "../platform/database.js";
import { notFound } from "../platform/errors.js";
import { forgettingOnDoubt } from "../platform/lost-connections.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { type BatchedTransactionOptions, inManagedTransaction } from "../platform/statement-batch.js";
import { requireUuid } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { SESSION_STATE } from "./entities.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";
import { toLicenseSession } from "./session-mapper.js";
import type { SessionStore } from "./session-store.js";

/** An entitlement's sessions, newest first: the seat view. */
export async function listSessions(
  deps: LicensingDependencies,
  request: ListSessionsRequest,
  context: HandlerContext,
): Promise<ListSessionsResponse> {
  const entitlementId = requireUuid("entitlementId", request.entitlementId);
  const page = resolvePage(request.pageNumber, request.pageSize);
  const providerId = providerOf(context);
  const now = deps.clock.now();
  const { dataSource, store } = deps;
  const { rows, total } = await readSerially(dataSource, async () => {
    const entitlement = await store.findEntitlement(dataSource.manager, entitlementId);
    if (entitlement?.providerId !== providerId) throw notFound("entitlement", entitlementId);
    return store.listSessions(dataSource.manager, {
      entitlementId,
      liveOnly: request.liveOnly,
      now,
      offset: page.offset,
      limit: page.pageSize,
    });
  });
  return create(ListSessionsResponseSchema, {
    ...pageInfo(page, total, rows.length),
    items: rows.map((row) => toLicenseSession(row, now)),
  });
}

/**
 * Ends a session at once: its floating seat, or its device's node-locked seat, is free, and its token is refused
 * by every session call on every instance. Ending an ended or released session answers it as it is; ending a
 * released node-locked session also frees the seat its device kept (`freeIdleDevice`).
 */
export async function endSession(
  deps: LicensingDependencies,
  request: EndSessionRequest,
  context: HandlerContext,
): Promise<EndSessionResponse> {
  const entitlementId = requireUuid("entitlementId", request.entitlementId);
  const sessionId = requireUuid("sessionId", request.sessionId);
  const providerId = providerOf(context);
  const { store } = deps;
  const now = deps.clock.now();
  const ending = (lockWait: BatchedTransactionOptions) =>
    inManagedTransaction(deps.dataSource, lockWait, async (manager) => {
      const entitlement = await store.lockEntitlement(manager, entitlementId);
      if (entitlement?.providerId !== providerId) throw notFound("entitlement", entitlementId);
      const found = await store.findSession(manager, sessionId, true);
      if (found?.entitlementId !== entitlementId) throw notFound("session", sessionId);
      if (found.state !== SESSION_STATE.live) {
        if (found.state === SESSION_STATE.released && !found.isFloating) {
          await freeIdleDevice(manager, store, entitlementId, found.fingerprintHash);
        }
        return { session: found, ended: false };
      }
      await store.endSession(manager, found, SESSION_STATE.ended, now);
      if (!found.isFloating) await store.removeDevice(manager, entitlementId, found.fingerprintHash);
      return { session: { ...found, state: SESSION_STATE.ended, endedAt: now }, ended: true };
    });
  const { session, ended } = await deps.entitlementTurns
    .run(entitlementId, ending)
    // It may have ended the session: the instances' caches look again.
    .catch((error: unknown) => forgettingOnDoubt(deps.dataSource, error, () => deps.sessionsChanged(sessionId)));
  if (ended) await deps.sessionsChanged(sessionId);
  return create(EndSessionResponseSchema, { session: toLicenseSession(session, now) });
}

/**
 * A node-locked device whose session was released without a transfer still holds its seat, for good but for the
 * vendor: ending that session (or any released session of the device) frees it, unless the device has a live session
 * again (which holds the seat).
 */
async function freeIdleDevice(
  manager: EntityManager,
  store: SessionStore,
  entitlementId: string,
  fingerprintHash: string,
): Promise<void> {
  const { sql, parameters } = store.liveSessionsOfDeviceStatement(entitlementId, fingerprintHash);
  const live = (await manager.query(sql, parameters)) as unknown[];
  if (live.length === 0) await store.removeDevice(manager, entitlementId, fingerprintHash);
}
