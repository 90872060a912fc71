import { type BatchedTransaction, inBatchedTransaction, type Statement } from "../platform/statement-batch.js";
import {
  type Activated,
  type ActivationDependencies,
  codeNotFound,
  factsWithProducts,
  newSession,
  readFeatures,
  startsTrial,
} from "./activation.js";
import { activationCodesByKeysStatement, activationCodesOf } from "./activation-code-store.js";
import { checkHost, checkSignedIn, type Preparation, Unprepared } from "./activation-preparation.js";
import {
  type ActivationAsk,
  checkActivation,
  type EntitlementFacts,
  firstActivationOf,
  isTrialActivation,
  leaseFor,
} from "./activation-rules.js";
import type { ActivationCodeRow, EntitlementRow, LicenseSessionRow } from "./entities.js";
import { activatedEvent } from "./entitlement-events.js";
import type { FloatingSeatCount } from "./floating-seat-counts.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { codeFacts } from "./license-facts.js";
import { seatLimit } from "./seat-allocation.js";
import { CODE_DEVICES } from "./session-store.js";

/** One activation waiting for its entitlement's group: a presented code, no interactive user. */
export interface GroupedActivation {
  key: string;
  ask: ActivationAsk;
  /** The fingerprint's hash. */
  hash: string;
  now: Date;
  clientAddress: string;
  prepared: Preparation;
}

export type GroupOutcome =
  | { kind: "activated"; activated: Activated }
  | { kind: "refused"; error: unknown }
  /** It needs what a group does not do, or what is not prepared yet: it runs by itself. */
  | { kind: "alone" };

/** The entitlement a group activates, and its provider. */
export interface GroupOwner {
  entitlementId: string;
  providerId: string;
}

interface Accepted {
  kind: "accepted";
  job: GroupedActivation;
  code: ActivationCodeRow;
  session: LicenseSessionRow;
  trial: boolean;
}

type Decision = Accepted | Exclude<GroupOutcome, { kind: "activated" }>;

/** What the group's locking reads found, changed in memory by each activation the group accepts. */
interface GroupState {
  deps: ActivationDependencies;
  entitlement: EntitlementRow;
  facts: EntitlementFacts;
  codes: Map<string, ActivationCodeRow>;
  count: FloatingSeatCount;
  /** Devices with a live session on the entitlement, and those the group activates. */
  busyDevices: Set<string>;
}

const ALONE = { kind: "alone" } as const;

/**
 * Activations of one entitlement, in one transaction of two batches whatever their number: the entitlement,
 * the codes, the devices' live sessions and the floating seat count are read and locked once (in the order the
 * single activation takes them); each activation is decided in turn against them, as the single activation's
 * rules decide it, with the seats, code uses and devices of those before it counted; then the accepted ones are
 * written together. It takes floating or unlimited seats of codes that use the entitlement's seats; an activation
 * that needs more (node-locked seats, a code's own device limit, a device activating again, lapsed seats, time
 * from the first activation, a trial starting, a user or host names not prepared) is answered `alone`.
 */
export function activateGroup(
  deps: ActivationDependencies,
  owner: GroupOwner,
  jobs: GroupedActivation[],
): Promise<GroupOutcome[]> {
  return inBatchedTransaction(deps.dataSource, (transaction) => groupInTransaction(deps, transaction, owner, jobs));
}

async function groupInTransaction(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  owner: GroupOwner,
  jobs: GroupedActivation[],
): Promise<GroupOutcome[]> {
  const { store, dataSource } = deps;
  const { entitlementId } = owner;
  const keptProductIds = deps.entitlementProducts.keptIds(entitlementId, true);
  const productRead = keptProductIds ? [] : [store.licensedProductsStatement(entitlementId)];
  const [entitlementRows, codeRows, sessionRows, countRows, receiverRows, productRows] = await transaction.run([
    store.entitlementStatement(entitlementId, true),
    activationCodesByKeysStatement(dataSource.manager, [...new Set(jobs.map((job) => job.key))], true),
    store.liveSessionsOfDevicesStatement(entitlementId, [...new Set(jobs.map((job) => job.hash))]),
    store.floatingSeats.countStatement(entitlementId),
    deps.events.receiversStatement(owner.providerId),
    ...productRead,
  ]);
  const entitlement = store.entitlementOf(entitlementRows);
  if (!entitlement) return jobs.map(() => ({ kind: "refused", error: codeNotFound() }));
  const state: GroupState = {
    deps,
    entitlement,
    facts: await factsWithProducts(deps, transaction, entitlement, { productRows, keptProductIds }),
    codes: new Map(activationCodesOf(dataSource.manager, codeRows).map((code) => [code.codeKey, code])),
    count: store.floatingSeats.countOf(countRows),
    busyDevices: store.devicesWithLiveSessionsOf(sessionRows),
  };
  const decisions = jobs.map((job) => decide(state, job));
  const accepted = decisions.filter((decision): decision is Accepted => decision.kind === "accepted");
  const receiving = deps.events.receives(receiverRows);
  const events = receiving ? accepted.map(({ session }) => activatedEvent(entitlement, session, [])) : [];
  const kept = deps.entitlementFeatures.get(entitlementId, entitlement.revision);
  const writes = accepted.length === 0 ? [] : [...groupWrites(state, accepted), ...eventWrite(deps, events)];
  const written = await transaction.commitWith(kept || writes.length === 0 ? writes : [...writes, featuresRead(state)]);
  const features = kept ?? (accepted.length > 0 ? readFeatures(deps, entitlement, written[written.length - 1]) : []);
  return decisions.map((decision) => {
    if (decision.kind !== "accepted") return decision;
    const { session, trial } = decision;
    const activated = { session, entitlement, facts: state.facts, features, trial, replaced: [], trialStarted: false };
    return { kind: "activated", activated: { ...activated, eventWritten: events.length > 0 } };
  });
}

/** One activation against the group's state: accepted (and counted in it), refused, or sent to run alone. */
function decide(state: GroupState, job: GroupedActivation): Decision {
  const { deps, entitlement, facts } = state;
  const code = state.codes.get(job.key);
  if (!code || code.entitlementId !== entitlement.id) return { kind: "refused", error: codeNotFound() };
  const claim = facts.policy?.claimBasedActivation;
  const seatsFloat = claim?.isFloatingLicense ?? false;
  if (!code.useEntitlementMaxActivations || (claim && !seatsFloat) || endsAfterFirstActivation(facts.policy)) {
    return ALONE;
  }
  if (state.busyDevices.has(job.hash)) return ALONE;
  if (seatsFloat && mayHaveLapsed(state.count, job.now)) return ALONE;
  try {
    const codeFact = codeFacts(code);
    checkSignedIn(deps, job.prepared, () => checkActivation(facts, codeFact, job.ask, job.now));
    checkHost(deps, facts.policy, job.clientAddress, job.prepared);
    const lease = leaseFor(facts, codeFact, job.ask.requestedLeaseMs, job.now, firstActivationOf(facts, codeFact));
    if (startsTrial(facts, lease.trialEndsAt)) return ALONE;
    if (seatsFloat) takeFloatingSeat(state.count, claim?.numberOfSeats ?? 0, lease.graceEndsAt);
    const trial = isTrialActivation(facts, codeFact);
    const parts = { entitlement, codeId: code.id, ask: job.ask, hash: job.hash, trial, lease, now: job.now };
    const session = newSession(deps, { ...parts, floating: seatsFloat }, job.clientAddress);
    countUse(code, job);
    state.busyDevices.add(job.hash);
    return { kind: "accepted", job, code, session, trial };
  } catch (error) {
    return error instanceof Unprepared ? ALONE : { kind: "refused", error };
  }
}

/** Whether a held seat's grace may be over: finding which is the single activation's work. */
function mayHaveLapsed(count: FloatingSeatCount, now: Date): boolean {
  return count.earliestEnd !== null && count.earliestEnd <= now;
}

/** One more seat held, or a 409 when all are (0 seats: unlimited). */
function takeFloatingSeat(count: FloatingSeatCount, seats: number, graceEndsAt: Date): void {
  if (seats > 0 && count.held >= seats) throw seatLimit(seats);
  count.held += 1;
  if (count.earliestEnd === null || graceEndsAt < count.earliestEnd) count.earliestEnd = graceEndsAt;
}

/** What `recordCodeUseStatement` writes, on the code as read: the next activation with it sees it. */
function countUse(code: ActivationCodeRow, job: GroupedActivation): void {
  code.activationCodeUseCount += 1;
  code.activationTimeStamp ??= job.now;
  code.userConsent ||= job.ask.acceptLicenseTerms;
}

/** The accepted activations' rows: the seat count, each code's uses, its devices, the sessions. */
function groupWrites(state: GroupState, accepted: Accepted[]): Statement[] {
  const { store } = state.deps;
  const seatsFloat = state.facts.policy?.claimBasedActivation?.isFloatingLicense ?? false;
  const uses = new Map<ActivationCodeRow, number>();
  for (const { code } of accepted) uses.set(code, (uses.get(code) ?? 0) + 1);
  const devices = accepted.map(({ job, code }) => ({
    ownerId: code.id,
    fingerprintHash: job.hash,
    fingerprint: job.ask.fingerprint,
    activationCodeId: code.id,
    now: job.now,
  }));
  return [
    ...(seatsFloat ? [store.floatingSeats.storeStatement(state.entitlement.id, state.count)] : []),
    ...[...uses].map(([code, count]) =>
      store.recordCodeUseStatement(code.id, code.userConsent, code.activationTimeStamp as Date, count),
    ),
    store.addDevicesOnceStatement(CODE_DEVICES, devices),
    store.insertSessionsStatement(accepted.map(({ session }) => session)),
  ];
}

function eventWrite(deps: ActivationDependencies, events: ReturnType<typeof activatedEvent>[]): Statement[] {
  return events.length > 0 ? [deps.events.appendStatement(events)] : [];
}

function featuresRead(state: GroupState): Statement {
  return state.deps.store.entitlementFeaturesStatement(state.entitlement.id);
}
