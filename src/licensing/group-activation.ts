import { isLockWaitTimeout } from "../platform/database.js";
import { CommitInDoubt, endLostConnection } from "../platform/lost-connections.js";
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
import { codeNotFound, factsOfEveryProduct, newSession, readFeatures, trialStartEnd } from "./activation-steps.js";
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
  | { kind: "alone" }
  /** Its entitlement is locked elsewhere, and the group passed it over (see GroupLocking). */
  | { kind: "blocked" };

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
  /** The entitlements the group would have passed over had another transaction held them. */
  passedOver: Set<string>;
  entitlements: Map<string, LockedEntitlement>;
  codes: Map<string, ActivationCodeRow>;
  seats: GroupSeats;
  /** Devices with a live session on their entitlement, and those the group activates (`deviceKey`s). */
  busyDevices: Set<string>;
  /** The providers with a subscription that receives events. */
  receiving: Set<string>;
}

const ALONE = { kind: "alone" } as const;
const BLOCKED = { kind: "blocked" } as const;

/**
 * Activations of any entitlements, in one transaction of three batches whatever their number (a fourth when a
 * policy newly needs its products' codes): the entitlements are locked in the order of their ids (those held
 * elsewhere passed over: see GroupLocking); the codes and the devices' live sessions of the entitlements held are
 * read and locked once, with the seat counts and devices the activations' seat plans need (`GroupSeats`); each
 * activation is decided in turn, by the single activation's rules, with the seats, code uses and devices of those
 * before it counted; then the accepted ones are written together, one statement for each kind of row. An
 * activation that needs more (a device activating again, lapsed floating seats, time counted from the first
 * activation, a trial starting, a user or host names not prepared, a seat plan that no longer holds) is answered
 * `alone`.
 */
export function activateGroup(
  deps: ActivationDependencies,
  jobs: GroupedActivation[],
  locking: GroupLocking,
): Promise<GroupOutcome[]> {
  return inBatchedTransaction(deps.dataSource, (transaction) => groupInTransaction(deps, transaction, jobs, locking), {
    lockWaitSeconds: locking.waitSeconds,
  });
}

async function groupInTransaction(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  jobs: GroupedActivation[],
  locking: GroupLocking,
): Promise<GroupOutcome[]> {
  const state = await lockedGroup(deps, transaction, jobs, locking);
  const decisions = jobs.map((job) => decide(state, job));
  const accepted = decisions.filter((decision): decision is Accepted => decision.kind === "accepted");
  const announced = accepted.filter(({ session }) => state.receiving.has(session.providerId));
  const events = announced.map(({ locked, session }) => activatedEvent(locked.entitlement, session, []));
  const features = featuresOf(deps, accepted);
  const writes = accepted.length === 0 ? [] : [...groupWrites(state, accepted), ...eventWrite(deps, events)];
  const featureStatements = features.toRead.map(({ id }) => deps.store.entitlementFeaturesStatement(id));
  const written = await transaction.commitWith([...writes, ...featureStatements]).catch((error: unknown) => {
    if (accepted.length === 0 || !(error instanceof CommitInDoubt)) throw error;
    throw new GroupCommitInDoubt(error, async () => {
      await endLostConnection(deps.dataSource, error);
      return (await groupCommitted(deps, accepted, features)) ? outcomesOf(state, decisions, features) : undefined;
    });
  });
  for (const [index, entitlement] of features.toRead.entries()) {
    features.byEntitlement.set(entitlement.id, readFeatures(deps, entitlement, written[writes.length + index]));
  }
  return outcomesOf(state, decisions, features);
}

/**
 * The connection was lost once the group's last batch (its COMMIT) was sent: the group may have committed.
 * `settle` answers its outcomes when it did, undefined when it did not.
 */
export class GroupCommitInDoubt extends Error {
  constructor(
    readonly doubt: CommitInDoubt,
    readonly settle: () => Promise<GroupOutcome[] | undefined>,
  ) {
    super("the connection was lost during a group's COMMIT");
  }
}

/**
 * Whether the group's rows are there (its first session's, since they commit together); the features its
 * COMMIT would have read are read now, not kept (they may be of a later revision).
 */
async function groupCommitted(
  deps: ActivationDependencies,
  accepted: Accepted[],
  features: ReturnType<typeof featuresOf>,
): Promise<boolean> {
  const { store, dataSource } = deps;
  if (!(await store.findSession(dataSource.manager, accepted[0].session.id))) return false;
  for (const entitlement of features.toRead) {
    const { sql, parameters } = store.entitlementFeaturesStatement(entitlement.id);
    features.byEntitlement.set(entitlement.id, store.featuresOf(await dataSource.query(sql, parameters)));
  }
  return true;
}

function outcomesOf(state: GroupState, decisions: Decision[], features: ReturnType<typeof featuresOf>) {
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
 * How a group takes its entitlements' locks: it waits for those `waitsFor` names (held by this instance's group
 * before it, which commits next) and passes over any other that another transaction holds, so that a lock held
 * elsewhere (a stalled instance, an operator's session) holds up its own entitlement's activations only: they
 * answer `blocked`. `locked` hears which the group holds, as soon as it holds them.
 * With `waitSeconds` (MySQL), the group waits that long at most for any lock: for those entitlements it then throws
 * LocksNotGranted (when the group before it commits, a row it held may go to a transaction that queued for it
 * earlier); for any other row it fails as a whole (503 `database-busy`).
 */
export interface GroupLocking {
  waitsFor(entitlementId: string): boolean;
  locked(entitlementIds: string[]): void;
  waitSeconds?: number;
}

/** A group that waits for every lock it needs, through the server's lock-wait timeout. */
export const WAITING_FOR_EVERY_LOCK: GroupLocking = { waitsFor: () => true, locked: () => {} };

/** The same locking, passing over every entitlement another transaction holds. */
export function passingOverEvery(locking: GroupLocking): GroupLocking {
  return { ...locking, waitsFor: () => false };
}

/** A group's lock wait timed out (after `GroupLocking.waitSeconds`); its transaction was rolled back. */
export class LocksNotGranted extends Error {
  constructor() {
    super("an entitlement's lock was not granted in time");
  }
}

/**
 * The group's first batches: its entitlements locked (in a round trip of their own, so that nothing of an
 * entitlement passed over is read or locked), with which providers receive events and the products not kept;
 * then the codes and the devices' live sessions locked, and the seats' reads, of the activations whose
 * entitlement the group holds.
 */
async function lockedGroup(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  jobs: GroupedActivation[],
  locking: GroupLocking,
): Promise<GroupState> {
  const { store, dataSource } = deps;
  const { rows, passedOver, receiving, products } = await lockEntitlements(deps, transaction, jobs, locking);
  const heldIds = new Set(rows.map((row) => row.id));
  const held = jobs.filter((job) => heldIds.has(job.owner.entitlementId));
  const asks = held.map(seatAskOf);
  const seats = new GroupSeats(store, asks);
  const seatReads = seats.reads();
  const [codeRows, sessionRows, ...seatRows] =
    held.length === 0
      ? [[], []]
      : await transaction.run([
          activationCodesByKeysStatement(dataSource.manager, [...new Set(held.map((job) => job.key))], true),
          store.liveSessionsOfDevicesStatement(devicesByOwner(asks, entitlementOfAsk)),
          ...seatReads,
        ]);
  seats.load(seatRows);
  const everyProduct: { providerId: string; facts: EntitlementFacts }[] = [];
  for (const entitlement of rows) {
    const facts = await factsOfEveryProduct(deps, transaction, entitlement, products(entitlement.id));
    everyProduct.push({ providerId: entitlement.providerId, facts });
  }
  const licensed = await deps.productStatuses.licensableEach(everyProduct, "activate", transaction);
  const entitlements = new Map(rows.map((row, index) => [row.id, { entitlement: row, facts: licensed[index] }]));
  return {
    deps,
    passedOver,
    entitlements,
    codes: new Map(activationCodesOf(dataSource.manager, codeRows).map((code) => [code.codeKey, code])),
    seats,
    busyDevices: store.deviceKeysOf(sessionRows, "entitlement_id"),
    receiving,
  };
}

/** The entitlements the group holds (those passed over are missing), the providers receiving events, the products. */
async function lockEntitlements(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  jobs: GroupedActivation[],
  locking: GroupLocking,
) {
  const { store } = deps;
  const entitlementIds = [...new Set(jobs.map((job) => job.owner.entitlementId))].sort();
  const waited = entitlementIds.filter((id) => locking.waitsFor(id));
  const passedOver = entitlementIds.filter((id) => !locking.waitsFor(id));
  const locks = [
    ...(waited.length > 0 ? [store.entitlementsStatement(waited)] : []),
    ...(passedOver.length > 0 ? [store.entitlementsStatement(passedOver, true)] : []),
  ];
  const keptProducts = new Map(entitlementIds.map((id) => [id, deps.entitlementProducts.keptIds(id, true)]));
  const productReads = entitlementIds.filter((id) => !keptProducts.get(id));
  const [receiverRows, ...rest] = await runLocking(transaction, [
    deps.events.receiversStatement([...new Set(jobs.map((job) => job.owner.providerId))]),
    ...locks,
    ...productReads.map((id) => store.licensedProductsStatement(id)),
  ]);
  const rows = rest.slice(0, locks.length).flatMap((result) => store.entitlementsOf(result));
  locking.locked(rows.map((row) => row.id));
  const productRows = new Map(productReads.map((id, index) => [id, rest[locks.length + index]]));
  return {
    rows,
    passedOver: new Set(passedOver),
    receiving: deps.events.receivingOf(receiverRows),
    products: (id: string) => ({ productRows: productRows.get(id), keptProductIds: keptProducts.get(id) }),
  };
}

/** The locking batch; a lock waited for past the group's `waitSeconds` throws LocksNotGranted. */
async function runLocking(transaction: BatchedTransaction, statements: Statement[]) {
  try {
    return await transaction.run(statements);
  } catch (error) {
    throw isLockWaitTimeout(error) ? new LocksNotGranted() : error;
  }
}

function seatAskOf(job: GroupedActivation): SeatAsk {
  return { plan: job.plan, entitlementId: job.owner.entitlementId, hash: job.hash };
}

/** One activation against the group's state: accepted (and counted in it), refused, or sent to run alone. */
function decide(state: GroupState, job: GroupedActivation): Decision {
  const { deps } = state;
  const locked = state.entitlements.get(job.owner.entitlementId);
  if (!locked && state.passedOver.has(job.owner.entitlementId)) return BLOCKED;
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
    const firstActivationAt = firstActivationOf(facts, codeFact);
    const lease = leaseFor(facts, codeFact, job.ask.requestedLeaseMs, job.now, firstActivationAt);
    if (trialStartEnd(facts, codeFact, firstActivationAt, job.now)) return ALONE;
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
