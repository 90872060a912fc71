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
import type { ActivationCodeRow, EntitlementFeatureRow, EntitlementRow, LicenseSessionRow } from "./entities.js";
import { activatedEvent } from "./entitlement-events.js";
import { devicesByOwner, entitlementOfAsk, GroupSeats, type SeatAsk } from "./group-seats.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { codeFacts } from "./license-facts.js";
import type { SeatPlan } from "./seat-plans.js";
import { type CodeOwner, deviceKey } from "./session-store.js";

/** One activation waiting for the next group: a presented code, no interactive user. */
export interface GroupedActivation {
  key: string;
  /** The code's entitlement and its provider. */
  owner: CodeOwner;
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

interface Accepted {
  kind: "accepted";
  job: GroupedActivation;
  locked: LockedEntitlement;
  code: ActivationCodeRow;
  session: LicenseSessionRow;
  trial: boolean;
}

type Decision = Accepted | Exclude<GroupOutcome, { kind: "activated" }>;

interface LockedEntitlement {
  entitlement: EntitlementRow;
  facts: EntitlementFacts;
}

/** What the group's locking reads found, changed in memory by each activation the group accepts. */
interface GroupState {
  deps: ActivationDependencies;
  entitlements: Map<string, LockedEntitlement>;
  codes: Map<string, ActivationCodeRow>;
  seats: GroupSeats;
  /** Devices with a live session on their entitlement, and those the group activates (`deviceKey`s). */
  busyDevices: Set<string>;
  /** The providers with a subscription that receives events. */
  receiving: Set<string>;
}

const ALONE = { kind: "alone" } as const;

/**
 * Activations of any entitlements, in one transaction of two batches whatever their number (a third when a policy
 * newly needs its products' codes): the entitlements
 * (in the order of their ids), the codes and the devices' live sessions are read and locked once, with the seat
 * counts and devices the activations' seat plans need (`GroupSeats`); each activation is decided in turn, by the
 * single activation's rules, with the seats, code uses and devices of those before it counted; then the accepted
 * ones are written together, one statement for each kind of row. An activation that needs more (a device
 * activating again, lapsed floating seats, time counted from the first activation, a trial starting, a user or
 * host names not prepared, a seat plan that no longer holds) is answered `alone`.
 */
export function activateGroup(deps: ActivationDependencies, jobs: GroupedActivation[]): Promise<GroupOutcome[]> {
  return inBatchedTransaction(deps.dataSource, (transaction) => groupInTransaction(deps, transaction, jobs));
}

async function groupInTransaction(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  jobs: GroupedActivation[],
): Promise<GroupOutcome[]> {
  const state = await lockedGroup(deps, transaction, jobs);
  const decisions = jobs.map((job) => decide(state, job));
  const accepted = decisions.filter((decision): decision is Accepted => decision.kind === "accepted");
  const announced = accepted.filter(({ session }) => state.receiving.has(session.providerId));
  const events = announced.map(({ locked, session }) => activatedEvent(locked.entitlement, session, []));
  const features = featuresOf(deps, accepted);
  const writes = accepted.length === 0 ? [] : [...groupWrites(state, accepted), ...eventWrite(deps, events)];
  const featureStatements = features.toRead.map(({ id }) => deps.store.entitlementFeaturesStatement(id));
  const written = await transaction.commitWith([...writes, ...featureStatements]);
  for (const [index, entitlement] of features.toRead.entries()) {
    features.byEntitlement.set(entitlement.id, readFeatures(deps, entitlement, written[writes.length + index]));
  }
  return decisions.map((decision) =>
    decision.kind === "accepted"
      ? activatedOf(state, decision, features.byEntitlement.get(decision.session.entitlementId) ?? [])
      : decision,
  );
}

function activatedOf(state: GroupState, accepted: Accepted, features: EntitlementFeatureRow[]): GroupOutcome {
  const { session, trial } = accepted;
  const { entitlement, facts } = accepted.locked;
  const eventWritten = state.receiving.has(session.providerId);
  const activated = { session, entitlement, facts, features, trial, replaced: [], trialStarted: false, eventWritten };
  return { kind: "activated", activated };
}

/**
 * The features kept for the accepted activations' entitlements at their revisions, and the entitlements whose
 * features are not kept: read with the commit.
 */
function featuresOf(deps: ActivationDependencies, accepted: Accepted[]) {
  const byEntitlement = new Map<string, EntitlementFeatureRow[]>();
  const toRead = new Map<string, EntitlementRow>();
  for (const { locked } of accepted) {
    const { entitlement } = locked;
    const kept = deps.entitlementFeatures.get(entitlement.id, entitlement.revision);
    if (kept) byEntitlement.set(entitlement.id, kept);
    else toRead.set(entitlement.id, entitlement);
  }
  return { byEntitlement, toRead: [...toRead.values()] };
}

/**
 * The group's first batch: the entitlements, their codes and the devices' live sessions locked, which providers
 * receive events, the seats' reads and the products not kept.
 */
async function lockedGroup(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  jobs: GroupedActivation[],
): Promise<GroupState> {
  const { store, dataSource } = deps;
  const entitlementIds = [...new Set(jobs.map((job) => job.owner.entitlementId))].sort();
  const keptProducts = new Map(entitlementIds.map((id) => [id, deps.entitlementProducts.keptIds(id, true)]));
  const productReads = entitlementIds.filter((id) => !keptProducts.get(id));
  const asks = jobs.map(seatAskOf);
  const seats = new GroupSeats(store, asks);
  const seatReads = seats.reads();
  const [entitlementRows, codeRows, sessionRows, receiverRows, ...rest] = await transaction.run([
    store.entitlementsStatement(entitlementIds),
    activationCodesByKeysStatement(dataSource.manager, [...new Set(jobs.map((job) => job.key))], true),
    store.liveSessionsOfDevicesStatement(devicesByOwner(asks, entitlementOfAsk)),
    deps.events.receiversStatement([...new Set(jobs.map((job) => job.owner.providerId))]),
    ...seatReads,
    ...productReads.map((id) => store.licensedProductsStatement(id)),
  ]);
  seats.load(rest.slice(0, seatReads.length));
  const productRows = new Map(productReads.map((id, index) => [id, rest[seatReads.length + index]]));
  const entitlements = new Map<string, LockedEntitlement>();
  for (const entitlement of store.entitlementsOf(entitlementRows)) {
    const products = { productRows: productRows.get(entitlement.id), keptProductIds: keptProducts.get(entitlement.id) };
    entitlements.set(entitlement.id, {
      entitlement,
      facts: await factsWithProducts(deps, transaction, entitlement, products),
    });
  }
  return {
    deps,
    entitlements,
    codes: new Map(activationCodesOf(dataSource.manager, codeRows).map((code) => [code.codeKey, code])),
    seats,
    busyDevices: store.deviceKeysOf(sessionRows, "entitlement_id"),
    receiving: deps.events.receivingOf(receiverRows),
  };
}

function seatAskOf(job: GroupedActivation): SeatAsk {
  return { plan: job.plan, entitlementId: job.owner.entitlementId, hash: job.hash };
}

/** One activation against the group's state: accepted (and counted in it), refused, or sent to run alone. */
function decide(state: GroupState, job: GroupedActivation): Decision {
  const { deps } = state;
  const locked = state.entitlements.get(job.owner.entitlementId);
  const code = state.codes.get(job.key);
  if (!locked || !code || code.entitlementId !== locked.entitlement.id)
    return { kind: "refused", error: codeNotFound() };
  const { entitlement, facts } = locked;
  const claim = facts.policy?.claimBasedActivation;
  const device = deviceKey(entitlement.id, job.hash);
  if (endsAfterFirstActivation(facts.policy) || state.busyDevices.has(device)) return ALONE;
  if (!state.seats.decides(entitlement.id, code, claim, job.hash, job.now)) return ALONE;
  try {
    const codeFact = codeFacts(code);
    checkSignedIn(deps, job.prepared, () => checkActivation(facts, codeFact, job.ask, job.now));
    checkHost(deps, facts.policy, job.clientAddress, job.prepared);
    const lease = leaseFor(facts, codeFact, job.ask.requestedLeaseMs, job.now, firstActivationOf(facts, codeFact));
    if (startsTrial(facts, lease.trialEndsAt)) return ALONE;
    const seatDevice = {
      fingerprintHash: job.hash,
      fingerprint: job.ask.fingerprint,
      activationCodeId: code.id,
      now: job.now,
    };
    state.seats.take(entitlement.id, code, claim, seatDevice, lease.graceEndsAt);
    const trial = isTrialActivation(facts, codeFact);
    const parts = { entitlement, codeId: code.id, ask: job.ask, hash: job.hash, trial, lease, now: job.now };
    const session = newSession(deps, { ...parts, floating: claim?.isFloatingLicense ?? false }, job.clientAddress);
    countUse(code, job);
    state.busyDevices.add(device);
    return { kind: "accepted", job, locked, code, session, trial };
  } catch (error) {
    return error instanceof Unprepared ? ALONE : { kind: "refused", error };
  }
}

/** What `recordCodeUsesStatement` writes, on the code as read: the next activation with it sees it. */
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
  const codeUses = [...uses].map(([code, count]) => ({
    codeId: code.id,
    consented: code.userConsent,
    firstAt: code.activationTimeStamp as Date,
    uses: count,
  }));
  return [
    ...state.seats.writes(),
    store.recordCodeUsesStatement(codeUses),
    store.insertSessionsStatement(accepted.map(({ session }) => session)),
  ];
}

function eventWrite(deps: ActivationDependencies, events: ReturnType<typeof activatedEvent>[]): Statement[] {
  return events.length > 0 ? [deps.events.appendStatement(events)] : [];
}
