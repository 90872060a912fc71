import type { HandlerContext } from "@connectrpc/connect";
import { providerOf } from "../server/tenant.js";
import { type LicenseSessionRow, SESSION_STATE } from "./entities.js";
import {
  cachedSession,
  cachedSessionStatus,
  notRunning,
  type SessionCallDependencies,
  sessionGone,
  sessionLapsed,
  sessionOfCall,
} from "./session-calls.js";

/** The session a session call (usage, logs, metrics, ratings) records for, with its owners. */
export interface SessionOfCall {
  sessionId: string;
  entitlementId: string;
  providerId: string;
}

/** What tells whether a session is live: the per-instance session cache check-in reads, and its loader. */
export type LiveSessions = Pick<SessionCallDependencies, "caches" | "store" | "dataSource" | "clock">;

/**
 * The caller's session, which must be `sessionId` (403 `wrong-session` otherwise) and still live: a released or
 * ended session's token is refused (401) as check-in refuses it, and so is one whose session's own grace is over.
 * The session's state comes from the cache check-in keeps on each instance (dropped everywhere when the session
 * changes): no database read per call.
 */
export async function liveSessionOfCall(
  sessions: LiveSessions,
  sessionId: string,
  context: HandlerContext,
): Promise<SessionOfCall> {
  const caller = sessionOfCall({ sessionId }, context);
  await liveSession(sessions, sessionId);
  return { sessionId, entitlementId: caller.entitlementId, providerId: providerOf(context) };
}

/**
 * A live session of the caller's (see liveSessionOfCall) whose license still runs: refused 403 as renew refuses
 * it when check-in would report the entitlement revoked, the license expired or the subscription inactive. For
 * calls that start consumption (pre-allocation); usage already consumed is still reported.
 */
export async function runningSessionOfCall(
  sessions: LiveSessions,
  sessionId: string,
  context: HandlerContext,
): Promise<SessionOfCall> {
  const caller = sessionOfCall({ sessionId }, context);
  const session = await liveSession(sessions, sessionId);
  const status = await cachedSessionStatus(sessions, session, sessions.clock.now());
  if (status === null) throw sessionGone(SESSION_STATE.ended);
  const refusal = notRunning(status);
  if (refusal) throw refusal;
  return { sessionId, entitlementId: caller.entitlementId, providerId: providerOf(context) };
}

async function liveSession(sessions: LiveSessions, sessionId: string): Promise<LicenseSessionRow> {
  const session = await cachedSession(sessions, sessionId);
  if (session?.state !== SESSION_STATE.live) throw sessionGone(session?.state ?? SESSION_STATE.ended);
  if (session.graceEndsAt <= sessions.clock.now()) throw sessionLapsed();
  return session;
}
