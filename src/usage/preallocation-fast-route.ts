import { UsageService } from "../../gen/provision/v1/usage_pb.js";
import { SESSION_STATE } from "../licensing/entities.js";
import type { LicenseClaims } from "../licensing/license-claims.js";
import type { LicenseTokens } from "../licensing/license-tokens.js";
import { rememberedSession } from "../licensing/remembered-session.js";
import { cachedSession, cachedSessionStatus, notRunning } from "../licensing/session-calls.js";
import type { FastRoute } from "../server/rest/fast-route.js";
import { amountOf, preallocationTarget, reserveAndRecord } from "./try-preallocate.js";
import type { UsageDependencies } from "./usage-dependencies.js";

/** `?amount=` as the fast route reads it: a plain decimal number. Any other query is the full pipeline's. */
const PLAIN_AMOUNT = /^\d{1,10}(?:\.\d{1,6})?$/;

/**
 * REST pre-allocation for a live session whose token this instance verified before, with `?amount=` alone in
 * the query. It declines (and the full pipeline answers) until the reservation is certain to be tried: a token
 * not seen yet, a session no longer live (or past its own grace), a license no longer running (revoked, expired,
 * subscription inactive), another query, an amount or metric refused. From the reservation on,
 * it answers its own result and failures, as a pre-allocation must not be tried twice.
 */
export function preallocationFastRoute(deps: UsageDependencies, tokens: LicenseTokens): FastRoute<LicenseClaims> {
  return {
    method: UsageService.method.tryPreallocate,
    readsQuery: true,
    caller: rememberedSession(tokens),
    async prepare(claims, variables, query) {
      const amount = plainAmount(query);
      if (amount === undefined) return undefined;
      const session = await cachedSession(deps.sessions, claims.sessionId);
      const now = deps.clock.now();
      if (session?.state !== SESSION_STATE.live || session.graceEndsAt <= now) return undefined;
      const status = await cachedSessionStatus(deps.sessions, session, now);
      if (status === null || notRunning(status)) return undefined;
      const { sessionId, entitlementId, providerId } = claims;
      const caller = { sessionId, entitlementId, providerId };
      const target = await preallocationTarget(deps, caller, variables.metric, amountOf(amount));
      return () => reserveAndRecord(deps, target);
    },
  };
}

function plainAmount(query: URLSearchParams): number | undefined {
  let amount: string | undefined;
  let parameters = 0;
  for (const [name, value] of query) {
    parameters++;
    if (name === "amount") amount = value;
  }
  return parameters === 1 && amount !== undefined && PLAIN_AMOUNT.test(amount) ? Number(amount) : undefined;
}
