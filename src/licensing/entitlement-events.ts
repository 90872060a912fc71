import { create, type DescMessage, type Message } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  EntitlementActivatedDataSchema,
  EntitlementCancelledDataSchema,
  EntitlementPlanAppliedDataSchema,
} from "../../gen/provision/v1/webhook_events_pb.js";
import type { EventDraft } from "../webhooks/outbox.js";
import type { EntitlementRow, LicenseSessionRow } from "./entities.js";
import { policyOf } from "./entitlement-mapper.js";

/** Why a plan was applied: a new entitlement, one made from a template, or a change. */
export type PlanCause = "created" | "from-template" | "updated";

/** The members every entitlement event's `data` starts with. */
export function entitlementData(row: EntitlementRow) {
  return { entitlementId: row.id, customerId: row.customerId, orderId: row.orderId, reference: row.reference };
}

/** An event about an entitlement, at `now`. */
export function entitlementEvent(
  row: EntitlementRow,
  type: string,
  now: Date,
  dataSchema: DescMessage,
  data: Message,
): EventDraft {
  return {
    providerId: row.providerId,
    type,
    entityKind: "entitlement",
    entityId: row.id,
    subject: `entitlements/${row.id}`,
    eventVersion: 1,
    time: now,
    dataSchema,
    data,
  } satisfies EventDraft;
}

/** Entitlement.Activated for a new session. */
export function activatedEvent(
  entitlement: EntitlementRow,
  session: LicenseSessionRow,
  replacedSessionIds: string[],
): EventDraft {
  const data = create(EntitlementActivatedDataSchema, {
    ...entitlementData(entitlement),
    sessionId: session.id,
    activationCodeId: session.activationCodeId,
    fingerprint: session.fingerprint,
    isTrial: session.isTrial,
    activatedAt: timestampFromDate(session.activatedAt),
    leaseExpiresAt: timestampFromDate(session.leaseExpiresAt),
    graceEndsAt: timestampFromDate(session.graceEndsAt),
    softwareVersion: session.softwareVersion,
    replacedSessionIds,
  });
  return entitlementEvent(
    entitlement,
    "Entitlement.Activated",
    session.activatedAt,
    EntitlementActivatedDataSchema,
    data,
  );
}

export interface PlanChange {
  cause: PlanCause;
  productIds: string[];
  templateId?: string;
  /** For cause `updated`: whether features' values or flags were changed. */
  featuresChanged?: boolean;
}

/**
 * The events of a write to an entitlement (`before` null when it is new): PlanApplied when it is created or its
 * products, features, seats or policy change, Cancelled when it is revoked or its subscription is set inactive
 * without soft enforcement. Templates emit nothing.
 */
export function entitlementEvents(
  before: EntitlementRow | null,
  after: EntitlementRow,
  change: PlanChange,
  now: Date,
): EventDraft[] {
  if (after.isTemplate) return [];
  const events: EventDraft[] = [];
  const changes = before ? planChanges(before, after, change.featuresChanged ?? false) : [];
  if (!before || changes.length > 0) events.push(planApplied(after, change, changes, now));
  const reason = before ? cancellation(before, after) : undefined;
  if (reason) {
    const data = create(EntitlementCancelledDataSchema, {
      ...entitlementData(after),
      reason,
      cancelledAt: timestampFromDate(now),
    });
    events.push(entitlementEvent(after, "Entitlement.Cancelled", now, EntitlementCancelledDataSchema, data));
  }
  return events;
}

function planApplied(row: EntitlementRow, change: PlanChange, changes: string[], now: Date): EventDraft {
  const claim = policyOf(row)?.claimBasedActivation;
  const data = create(EntitlementPlanAppliedDataSchema, {
    ...entitlementData(row),
    cause: change.cause,
    templateId: change.templateId ?? "",
    changes,
    productIds: change.productIds,
    numberOfSeats: claim?.numberOfSeats ?? 0,
    isFloatingLicense: claim?.isFloatingLicense ?? false,
    isEntitlementTrial: row.isEntitlementTrial,
    expirationDateTime: row.expirationDateTime ? timestampFromDate(row.expirationDateTime) : undefined,
  });
  return entitlementEvent(row, "Entitlement.PlanApplied", now, EntitlementPlanAppliedDataSchema, data);
}

/** What of the plan changed: `seats`, `policy` (anything else of it; the service-set trial end aside), `features`. */
function planChanges(before: EntitlementRow, after: EntitlementRow, featuresChanged: boolean): string[] {
  const [old, now] = [policyOf(before), policyOf(after)];
  const changes: string[] = [];
  const seatsOf = (policy: typeof old) =>
    JSON.stringify([
      policy?.claimBasedActivation?.numberOfSeats ?? 0,
      policy?.claimBasedActivation?.isFloatingLicense ?? false,
    ]);
  if (seatsOf(old) !== seatsOf(now)) changes.push("seats");
  if (comparablePolicy(before) !== comparablePolicy(after)) changes.push("policy");
  if (featuresChanged) changes.push("features");
  return changes;
}

/** The policy without what the service sets itself (the trial's end) and without the seats (compared apart). */
function comparablePolicy(row: EntitlementRow): string {
  const policy = policyOf(row);
  if (!policy) return "";
  const copy = structuredClone(policy);
  if (copy.trialActivationPolicy) copy.trialActivationPolicy.trialEndsAt = undefined;
  if (copy.claimBasedActivation) {
    copy.claimBasedActivation.numberOfSeats = 0;
    copy.claimBasedActivation.isFloatingLicense = false;
  }
  return JSON.stringify(copy, (_key, value) => (typeof value === "bigint" ? value.toString() : value));
}

function cancellation(before: EntitlementRow, after: EntitlementRow): string | undefined {
  if (!before.isRevoked && after.isRevoked) return "revoked";
  const [old, now] = [policyOf(before)?.subscriptionPolicy, policyOf(after)?.subscriptionPolicy];
  const wasActive = old ? old.isSubscriptionActive || old.softEnforcement : true;
  const isCancelled = now !== undefined && !now.isSubscriptionActive && !now.softEnforcement;
  return wasActive && isCancelled ? "subscription-inactive" : undefined;
}
