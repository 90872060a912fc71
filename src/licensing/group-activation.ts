import { type BatchedTransaction, inBatchedTransaction, type Statement } from "../platform/statement-batch.js";
import type { Activated, ActivationDependencies } from "./activation.js";
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
import { codeNotFound, factsWithProducts, newSession, readFeatures, startsTrial } from "./activation-steps.js";
import type { ActivationCodeRow, EntitlementRow, LicenseSessionRow } from "./entities.js";
import { activatedEvent } from "./entitlement-events.js";
import { GroupSeats } from "./group-seats.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { codeFacts } from "./license-facts.js";
import type { SeatPlan } from "./seat-plans.js";

/** One activation waiting for its entitlement's group: a presented code, no interactive user. */
export interface GroupedActivation {
  key: string;
  ask: ActivationAsk;
  /** The fingerprint's hash. */
  hash: string;
  now: Date;
  clientAddress: string;
  prepared: Preparation;
  /** What the code's last activation on this instance read for its seat: what the group reads for it. */
  plan: SeatPlan;
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
  seats: GroupSeats;
  /** Devices with a live session on the entitlement, and those the group activates. */
  busyDevices: Set<string>;
}

const ALONE = { kind: "alone" } as const;

/**
 * Activations of one entitlement, in one transaction of two batches whatever their number: the entitlement, the
 * codes and the devices' live sessions are read and locked once (in the order the single activation takes them),
 * with the seat counts and devices the activations' seat plans need (`GroupSeats`); each activation is decided in
 * turn, by the single activation's rules, with the seats, code uses and devices of those before it counted; then
 * the accepted ones are written together. An activation that needs more (a device activating again, lapsed
 * floating seats, time counted from the first activation, a trial starting, a user or host names not prepared,
 * a seat plan that no longer holds) is answered `alone`.
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
  const locked = await lockedGroup(deps, transaction, owner, jobs);
  if (!locked) return jobs.map(() => ({ kind: "refused", error: codeNotFound() }));
  const { state, receiving } = locked;
  const { entitlement } = state;
  const decisions = jobs.map((job) => decide(state, job));
  const accepted = decisions.filter((decision): decision is Accepted => decision.kind === "accepted");
  const events = receiving ? accepted.map(({ session }) => activatedEvent(entitlement, session, [])) : [];
  const kept = deps.entitlementFeatures.get(entitlement.id, entitlement.revision);
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

/**
 * The group's first batch: the entitlement, its codes and the devices' live sessions locked, whether the provider
 * receives events, the seats' reads and the products when not kept; null when the entitlement is gone.
 */
async function lockedGroup(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  owner: GroupOwner,
  jobs: GroupedActivation[],
): Promise<{ state: GroupState; receiving: boolean } | null> {
  const { store, dataSource } = deps;
  const { entitlementId } = owner;
  const keptProductIds = deps.entitlementProducts.keptIds(entitlementId, true);
  const productRead = keptProductIds ? [] : [store.licensedProductsStatement(entitlementId)];
  const seats = new GroupSeats(store, entitlementId, jobs);
  const seatReads = seats.reads();
  const [entitlementRows, codeRows, sessionRows, receiverRows, ...rest] = await transaction.run([
    store.entitlementStatement(entitlementId, true),
    activationCodesByKeysStatement(dataSource.manager, [...new Set(jobs.map((job) => job.key))], true),
    store.liveSessionsOfDevicesStatement(entitlementId, [...new Set(jobs.map((job) => job.hash))]),
    deps.events.receiversStatement(owner.providerId),
    ...seatReads,
    ...productRead,
  ]);
  const entitlement = store.entitlementOf(entitlementRows);
  if (!entitlement) return null;
  seats.load(rest.slice(0, seatReads.length));
  const [productRows] = rest.slice(seatReads.length);
  const state: GroupState = {
    deps,
    entitlement,
    facts: await factsWithProducts(deps, transaction, entitlement, { productRows, keptProductIds }),
    codes: new Map(activationCodesOf(dataSource.manager, codeRows).map((code) => [code.codeKey, code])),
    seats,
    busyDevices: store.fingerprintHashesOf(sessionRows),
  };
  return { state, receiving: deps.events.receives(receiverRows) };
}

/** One activation against the group's state: accepted (and counted in it), refused, or sent to run alone. */
function decide(state: GroupState, job: GroupedActivation): Decision {
  const { deps, entitlement, facts } = state;
  const code = state.codes.get(job.key);
  if (!code || code.entitlementId !== entitlement.id) return { kind: "refused", error: codeNotFound() };
  const claim = facts.policy?.claimBasedActivation;
  if (endsAfterFirstActivation(facts.policy) || state.busyDevices.has(job.hash)) return ALONE;
  if (!state.seats.decides(code, claim, job.hash, job.now)) return ALONE;
  try {
    const codeFact = codeFacts(code);
    checkSignedIn(deps, job.prepared, () => checkActivation(facts, codeFact, job.ask, job.now));
    checkHost(deps, facts.policy, job.clientAddress, job.prepared);
    const lease = leaseFor(facts, codeFact, job.ask.requestedLeaseMs, job.now, firstActivationOf(facts, codeFact));
    if (startsTrial(facts, lease.trialEndsAt)) return ALONE;
    const device = {
      fingerprintHash: job.hash,
      fingerprint: job.ask.fingerprint,
      activationCodeId: code.id,
      now: job.now,
    };
    state.seats.take(code, claim, device, lease.graceEndsAt);
    const trial = isTrialActivation(facts, codeFact);
    const parts = { entitlement, codeId: code.id, ask: job.ask, hash: job.hash, trial, lease, now: job.now };
    const session = newSession(deps, { ...parts, floating: claim?.isFloatingLicense ?? false }, job.clientAddress);
    countUse(code, job);
    state.busyDevices.add(job.hash);
    return { kind: "accepted", job, code, session, trial };
  } catch (error) {
    return error instanceof Unprepared ? ALONE : { kind: "refused", error };
  }
}

/** What `recordCodeUseStatement` writes, on the code as read: the next activation with it sees it. */
function countUse(code: ActivationCodeRow, job: GroupedActivation): void {
  code.activationCodeUseCount += 1;
  code.activationTimeStamp ??= job.now;
  code.userConsent ||= job.ask.acceptLicenseTerms;
}

/** The accepted activations' rows: their seats and devices, each code's uses, the sessions. */
function groupWrites(state: GroupState, accepted: Accepted[]): Statement[] {
  const { store } = state.deps;
  const uses = new Map<ActivationCodeRow, number>();
  for (const { code } of accepted) uses.set(code, (uses.get(code) ?? 0) + 1);
  return [
    ...state.seats.writes(),
    ...[...uses].map(([code, count]) =>
      store.recordCodeUseStatement(code.id, code.userConsent, code.activationTimeStamp as Date, count),
    ),
    store.insertSessionsStatement(accepted.map(({ session }) => session)),
  ];
}

function eventWrite(deps: ActivationDependencies, events: ReturnType<typeof activatedEvent>[]): Statement[] {
  return events.length > 0 ? [deps.events.appendStatement(events)] : [];
}

function featuresRead(state: GroupState): Statement {
  return state.deps.store.entitlementFeaturesStatement(state.entitlement.id);
}
