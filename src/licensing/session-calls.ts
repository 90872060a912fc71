import { create } from "@bufbuild/protobuf";
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type CheckInSessionRequest,
  type CheckInSessionResponse,
  type ReleaseSessionRequest,
  type ReleaseSessionResponse,
  ReleaseSessionResponseSchema,
  type RenewSessionRequest,
  type RenewSessionResponse,
  RenewSessionResponseSchema,
  SessionStatus,
} from "../../gen/provision/v1/activation_pb.js";
import type { TrialActivationPolicy } from "../../gen/provision/v1/entitlement_pb.js";
import { bearerChallenge } from "../auth/access-tokens.js";
import { type LicenseSessionCaller, licenseSessionKey } from "../auth/auth-interceptor.js";
import { readSerially } from "../platform/database.js";
import { DomainError } from "../platform/errors.js";
import { forgettingOnDoubt } from "../platform/lost-connections.js";
import {
  type BatchedTransaction,
  type BatchedTransactionOptions,
  inBatchedTransaction,
  inManagedTransaction,
} from "../platform/statement-batch.js";
import { timestampLiteral } from "../platform/timestamps.js";
import { type ActivationDependencies, requestedLeaseMs } from "./activation.js";
import { activationCodeOf, activationCodeOfSessionStatement } from "./activation-code-store.js";
import { type EntitlementFacts, type Lease, leaseFor, sessionStatus } from "./activation-rules.js";
import type { CheckInWriter } from "./check-in-writer.js";
import { type LicenseSessionRow, SESSION_STATE } from "./entities.js";
import { productsReadOrKept } from "./entitlement-product-cache.js";
import type { LicenseClaims } from "./license-claims.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { codeFacts, entitlementFacts, licenseClaimsFor } from "./license-facts.js";
import type { LicensingCaches } from "./licensing-caches.js";
import { dateOf, earliest } from "./policy-time.js";
import { productUnavailable } from "./product-lifecycle.js";
import { sharedPolicyOf } from "./shared-policies.js";
import { effectiveSubscription } from "./subscription-periods.js";

export interface SessionCallDependencies extends ActivationDependencies {
  caches: LicensingCaches<EntitlementFacts>;
  checkIns: CheckInWriter;
}

/** The caller's session, which must be the one in the path; a token of another session is refused. */
export function sessionOfCall(request: { sessionId: string }, context: HandlerContext): LicenseSessionCaller {
  const caller = context.values.get(licenseSessionKey);
  if (!caller || caller.sessionId !== request.sessionId) {
    throw new DomainError("permission-denied", "the license token belongs to another session", {
      slug: "wrong-session",
    });
  }
  return caller;
}

/** The 401 answer to a token of a session no longer live. */
export function sessionGone(state: number): DomainError {
  const what = state === SESSION_STATE.released ? "released" : "ended";
  return new DomainError("unauthenticated", `the license session was ${what}; activate again`, {
    slug: `session-${what}`,
    headers: { "www-authenticate": bearerChallenge("invalid_token", `session ${what}`) },
  });
}

/** What check-in answers for a live session whose own grace is over: a renewal shortened it below the token's. */
const LAPSED = 0;

/**
 * The 401 answer to a token whose session's lease and grace are over before the token's own grace end (a renewal
 * shortened them, or, on renew, an activation took the floating seat back).
 */
export function sessionLapsed(): DomainError {
  return new DomainError("unauthenticated", "the license session's lease and grace are over; activate again", {
    slug: "invalid-license-token",
    headers: { "www-authenticate": bearerChallenge("invalid_token", "session lapsed") },
  });
}

/** Heartbeat: no database work — the session and the entitlement's standing come from memory when kept. */
export async function checkInSession(
  deps: SessionCallDependencies,
  request: CheckInSessionRequest,
  context: HandlerContext,
): Promise<CheckInSessionResponse> {
  const { sessionId } = sessionOfCall(request, context);
  const answer = await checkIn(deps, sessionId);
  if (answer === LAPSED) throw sessionLapsed();
  if (typeof answer === "number") throw sessionGone(answer);
  return answer;
}

/** A live session's check-in (recorded), or the state of one no longer live. */
export async function checkIn(
  deps: SessionCallDependencies,
  sessionId: string,
): Promise<CheckInSessionResponse | number> {
  const now = deps.clock.now();
  const session = await cachedSession(deps, sessionId);
  if (!session || session.state !== SESSION_STATE.live) return session?.state ?? SESSION_STATE.ended;
  if (session.graceEndsAt <= now) return LAPSED;
  const facts = await cachedStanding(deps, session.entitlementId);
  return facts ? checkedIn(deps, session, facts, now) : SESSION_STATE.ended;
}

/**
 * `checkIn` answered from what this instance keeps, with no wait: undefined when the session or its
 * entitlement's standing is not kept (then `checkIn` loads it).
 */
export function checkInFromMemory(
  deps: SessionCallDependencies,
  sessionId: string,
): CheckInSessionResponse | number | undefined {
  const now = deps.clock.now();
  const session = deps.caches.sessions.peek(sessionId, now.getTime());
  if (!session || session.state !== SESSION_STATE.live) return session?.state;
  if (session.graceEndsAt <= now) return LAPSED;
  const facts = deps.caches.standings.peek(session.entitlementId, now.getTime());
  return facts ? checkedIn(deps, session, facts, now) : undefined;
}

function checkedIn(
  deps: SessionCallDependencies,
  session: LicenseSessionRow,
  facts: EntitlementFacts,
  now: Date,
): CheckInSessionResponse {
  deps.checkIns.record(session.id, now);
  const subscription = facts.policy?.subscriptionPolicy;
  // Every field set, as `create` would leave them: the literal spares walking the schema on every check-in.
  return {
    $typeName: "provision.v1.CheckInSessionResponse",
    sessionId: session.id,
    leaseExpiresAt: timestampLiteral(session.leaseExpiresAt),
    status: sessionStatus(facts, standingOf(session), now),
    isRevoked: facts.isRevoked,
    isSubscriptionActive: subscription ? effectiveSubscription(subscription, now).active : true,
    expirationDateTime: facts.expirationDateTime ? timestampLiteral(facts.expirationDateTime) : undefined,
    serverTime: timestampLiteral(now),
    isEntitlementTrial: facts.isEntitlementTrial,
    trialEndsAt: trialEndOf(facts.policy?.trialActivationPolicy),
  };
}

/**
 * The trial's end as check-in reports it once the trial has started (the service set trialEndsAt): the trial
 * period's end or its notValidAfterTimestamp, the earlier.
 */
function trialEndOf(trial: TrialActivationPolicy | undefined): Timestamp | undefined {
  const periodEnd = dateOf(trial?.trialEndsAt);
  if (periodEnd === null) return undefined;
  return timestampLiteral(earliest(periodEnd, dateOf(trial?.notValidAfterTimestamp)) ?? periodEnd);
}

/** A new lease and token; refused when the standing no longer allows the license to run. */
export async function renewSession(
  deps: SessionCallDependencies,
  request: RenewSessionRequest,
  context: HandlerContext,
): Promise<RenewSessionResponse> {
  const { sessionId, entitlementId } = sessionOfCall(request, context);
  const now = deps.clock.now();
  const requestedMs = requestedLeaseMs(request.requestedLeaseDuration);
  const renewed = await inBatchedTransaction(deps.dataSource, (transaction) =>
    renewInTransaction(deps, transaction, { sessionId, entitlementId, requestedMs, now }),
  ).catch((error: unknown) =>
    // It may have renewed the session (a shorter lease, too): the instances' caches look again.
    forgettingOnDoubt(deps.dataSource, error, () => deps.caches.sessionsChanged(sessionId)),
  );
  await deps.caches.sessionsChanged(sessionId);
  const [licenseToken, tokenPublicKeyBase64] = await Promise.all([
    deps.tokens.sign(renewed.claims),
    deps.keys.publicKeyBase64(renewed.claims.providerId),
  ]);
  return create(RenewSessionResponseSchema, {
    sessionId,
    licenseToken,
    leaseExpiresAt: timestampFromDate(renewed.lease.leaseExpiresAt),
    tokenPublicKeyBase64,
  });
}

/**
 * A live session's new lease and the claims of its new token: one batch reads the session (locked), its
 * entitlement (as the token names it), code and, unless this instance keeps their ids, products; a second extends
 * the lease and commits (on MySQL the first starts the transaction: two round trips). The features are those an
 * activation on this instance kept for the revision read, or else read in the second batch.
 */
async function renewInTransaction(
  deps: SessionCallDependencies,
  transaction: BatchedTransaction,
  request: { sessionId: string; entitlementId: string; requestedMs: number | null; now: Date },
): Promise<{ claims: LicenseClaims; lease: Lease }> {
  const { store, dataSource } = deps;
  const { sessionId, entitlementId, now } = request;
  const keptProductIds = deps.entitlementProducts.keptIds(entitlementId, false);
  const productRead = keptProductIds ? [] : [store.licensedProductsStatement(entitlementId)];
  const [sessionRows, entitlementRows, codeRows, ...productRows] = await transaction.run([
    store.sessionStatement(sessionId, true),
    store.entitlementStatement(entitlementId, false),
    activationCodeOfSessionStatement(dataSource.manager, sessionId),
    ...productRead,
  ]);
  const found = store.sessionOf(sessionRows);
  if (!found || found.state !== SESSION_STATE.live) throw sessionGone(found?.state ?? SESSION_STATE.ended);
  if (seatLapsed(found) || found.graceEndsAt <= now) throw sessionLapsed();
  const entitlement = store.entitlementOf(entitlementRows);
  const code = activationCodeOf(dataSource.manager, codeRows);
  if (!entitlement || !code || found.entitlementId !== entitlementId) throw sessionGone(SESSION_STATE.ended);
  const read = keptProductIds ? undefined : store.productsOf(productRows[0]);
  const stored = entitlementFacts(entitlement, productsReadOrKept(read, keptProductIds), null);
  if (read) deps.entitlementProducts.remember(entitlementId, read.ids, stored.policy?.requireProductCode ?? false);
  const facts = await deps.productStatuses.licensable(entitlement.providerId, stored, "renew", transaction);
  if (facts.productsUnavailable) throw productUnavailable("renew");
  if (endsAfterFirstActivation(facts.policy)) {
    const [first] = await transaction.run([store.firstActivationStatement(entitlementId)]);
    facts.firstActivationAt = store.firstActivationOf(first);
  }
  refuseUnlessRunning(sessionStatus(facts, standingOf(found), now));
  const lease = leaseFor(facts, codeFacts(code), request.requestedMs, now, facts.firstActivationAt ?? null);
  const sooner = found.holdsFloatingSeat && lease.graceEndsAt < found.graceEndsAt;
  const kept = deps.entitlementFeatures.get(entitlementId, entitlement.revision);
  const written = await transaction.commitWith([
    store.extendLeaseStatement(sessionId, lease, now),
    ...(sooner ? [store.floatingSeats.earlierEndStatement(entitlementId, lease.graceEndsAt)] : []),
    ...(kept ? [] : [store.entitlementFeaturesStatement(entitlementId)]),
  ]);
  const claims = licenseClaimsFor({
    entitlement,
    facts,
    sessionId,
    fingerprint: found.fingerprint,
    lease,
    features: kept ?? store.featuresOf(written[written.length - 1]),
    trial: found.isTrial,
    now,
  });
  return { claims, lease };
}

/**
 * A floating session whose seat an activation took back, its grace being over: it is not renewed, even by an
 * instance whose clock has not reached that grace end yet.
 */
function seatLapsed(session: LicenseSessionRow): boolean {
  return session.isFloating && !session.holdsFloatingSeat;
}

const NOT_RUNNING: Partial<Record<SessionStatus, [string, string]>> = {
  [SessionStatus.REVOKED]: ["the entitlement was revoked", "entitlement-revoked"],
  [SessionStatus.EXPIRED]: ["the license has expired", "entitlement-expired"],
  [SessionStatus.SUBSCRIPTION_INACTIVE]: ["the subscription is not active", "subscription-inactive"],
};

/** The 403 renew (and pre-allocation) answer when a live session's status is not one a license runs in. */
export function notRunning(status: SessionStatus): DomainError | undefined {
  const refusal = NOT_RUNNING[status];
  return refusal && new DomainError("permission-denied", refusal[0], { slug: refusal[1] });
}

function refuseUnlessRunning(status: SessionStatus): void {
  const refusal = notRunning(status);
  if (refusal) throw refusal;
}

/**
 * The status check-in would report for a live session now, its entitlement's standing read from this instance's
 * cache (loaded on a miss); null when the entitlement is gone.
 */
export async function cachedSessionStatus(
  deps: CachedReads,
  session: LicenseSessionRow,
  now: Date,
): Promise<SessionStatus | null> {
  const facts = await cachedStanding(deps, session.entitlementId);
  return facts ? sessionStatus(facts, standingOf(session), now) : null;
}

/**
 * Ends the session and frees its floating seat, or its device's node-locked seat when the license is
 * transferable. Releasing again answers as the first release did; an ended session is refused. Locks the
 * entitlement before the session, in the order activation and EndSession take them.
 */
export async function releaseSession(
  deps: SessionCallDependencies,
  request: ReleaseSessionRequest,
  context: HandlerContext,
): Promise<ReleaseSessionResponse> {
  const { sessionId, entitlementId } = sessionOfCall(request, context);
  const now = deps.clock.now();
  const { store } = deps;
  const releasing = (lockWait: BatchedTransactionOptions) =>
    inManagedTransaction(deps.dataSource, lockWait, async (manager) => {
      const entitlement = await store.lockEntitlement(manager, entitlementId);
      const found = await store.findSession(manager, sessionId, true);
      if (found?.state === SESSION_STATE.released && found.endedAt)
        return { releasedAt: found.endedAt, changed: false };
      if (!entitlement || !found || found.state !== SESSION_STATE.live || found.entitlementId !== entitlementId) {
        throw sessionGone(found?.state ?? SESSION_STATE.ended);
      }
      await store.endSession(manager, found, SESSION_STATE.released, now);
      if (
        !found.isFloating &&
        sharedPolicyOf(entitlement.activationPolicy)?.claimBasedActivation?.isTransferableLicense
      ) {
        await store.removeDevice(manager, found.entitlementId, found.fingerprintHash);
      }
      return { releasedAt: now, changed: true };
    });
  const { releasedAt, changed } = await deps.entitlementTurns
    .run(entitlementId, releasing)
    // It may have released the session: the instances' caches look again.
    .catch((error: unknown) => forgettingOnDoubt(deps.dataSource, error, () => deps.caches.sessionsChanged(sessionId)));
  if (changed) await deps.caches.sessionsChanged(sessionId);
  return create(ReleaseSessionResponseSchema, { sessionId, released: true, releasedAt: timestampFromDate(releasedAt) });
}

function standingOf(session: LicenseSessionRow) {
  return {
    trial: session.isTrial,
    leaseExpiresAt: session.leaseExpiresAt,
    graceEndsAt: session.graceEndsAt,
    released: session.state === SESSION_STATE.released,
    ended: session.state === SESSION_STATE.ended,
  };
}

/** What the per-instance caches of sessions and standings are read and loaded through. */
type CachedReads = Pick<SessionCallDependencies, "caches" | "store" | "dataSource">;

/** A session's row from the per-instance cache check-in keeps (loaded on a miss). */
export function cachedSession(deps: CachedReads, sessionId: string) {
  const { dataSource, store } = deps;
  return deps.caches.sessions.get(sessionId, () =>
    readSerially(dataSource, () => store.findSession(dataSource.manager, sessionId)),
  );
}

function cachedStanding(deps: CachedReads, entitlementId: string) {
  const { dataSource, store } = deps;
  return deps.caches.standings.get(entitlementId, () =>
    readSerially(
      dataSource,
      async () => (await store.entitlementFacts(dataSource.manager, entitlementId))?.facts ?? null,
    ),
  );
}
