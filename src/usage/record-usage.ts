import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "typeorm";
import {
  type RecordUsageTransactionsRequest,
  type RecordUsageTransactionsResponse,
  RecordUsageTransactionsResponseSchema,
} from "../../gen/provision/v1/usage_pb.js";
import { liveSessionOfCall } from "../licensing/live-session.js";
import { isUniqueViolation } from "../platform/database.js";
import { DomainError } from "../platform/errors.js";
import { CommitInDoubt } from "../platform/lost-connections.js";
import { inManagedTransaction } from "../platform/statement-batch.js";
import { recountAfterDoubt } from "./commit-in-doubt.js";
import { countersUnavailable } from "./guarded-meters.js";
import type { MeterRef, Reserved } from "./meter-counters.js";
import { fromMicro, MAX_EXACT_TOTAL_MICRO } from "./usage-amounts.js";
import { BalancePeriodMoved } from "./usage-balance-store.js";
import type { UsageDependencies } from "./usage-dependencies.js";
import type { EntitlementUsage } from "./usage-directory.js";
import { invalidItems, type UsageItem, usageItemsOf } from "./usage-items.js";
import { entitlementUsageOf } from "./usage-lookup.js";
import { periodName, RECORD_KIND, type UsageRecordRow } from "./usage-store.js";

const MAX_ATTEMPTS = 8;

/** Some items of the batch were recorded before: look them up and record the others. */
class HasDuplicates extends Error {}

/** A period's row is held by another transaction: wait for it, in the entitlement's turn. */
class PeriodsHeld extends Error {}

/** These counters are missing (or of another generation): rebuild them and write again. */
class CountersMissing extends Error {
  /** Each counter with the database's generation of it (-1: its period has no row yet). */
  constructor(readonly refs: { ref: MeterRef; generation: number }[]) {
    super("usage counters to rebuild");
  }
}

/** How an attempt writes: looking up earlier records of the batch first; waiting for held periods. */
interface Attempt {
  checkDuplicates: boolean;
  waitForPeriods: boolean;
}

interface Reservation {
  ref: MeterRef;
  reserved: Reserved;
  amountMicro: number;
}

/**
 * Records a batch of usage transactions, all or nothing: the records, the duplicate check (by transactionId)
 * and the counters' reservations belong to one database transaction, and a reservation whose transaction does
 * not commit is given back.
 */
export async function recordUsageTransactions(
  deps: UsageDependencies,
  request: RecordUsageTransactionsRequest,
  context: HandlerContext,
): Promise<RecordUsageTransactionsResponse> {
  const { sessionId, entitlementId } = await liveSessionOfCall(deps.sessions, request.sessionId, context);
  const usage = await entitlementUsageOf(deps, entitlementId);
  const attempt: Attempt = { checkDuplicates: false, waitForPeriods: false };
  let toRebuild: { ref: MeterRef; generation: number }[] = [];
  for (let attempts = 1; attempts <= MAX_ATTEMPTS; attempts++) {
    try {
      await Promise.all(toRebuild.map(({ ref, generation }) => deps.counters.awaitGeneration(ref, generation)));
      toRebuild = [];
      const receivedAt = deps.clock.now();
      const items = await usageItemsOf(deps.counters, usage, sessionId, request.events, receivedAt);
      if (items.some((item) => item.tooOld)) attempt.checkDuplicates = true;
      const write = () => writeBatch(deps, { usage, sessionId, items, receivedAt }, attempt);
      const counts = attempt.waitForPeriods
        ? await deps.heldPeriodTurns.run(entitlementId, write)
        : await deps.batchTurns.run(write);
      return create(RecordUsageTransactionsResponseSchema, counts);
    } catch (error) {
      if (error instanceof HasDuplicates || isUniqueViolation(error)) attempt.checkDuplicates = true;
      else if (error instanceof PeriodsHeld) attempt.waitForPeriods = true;
      else if (error instanceof CountersMissing) toRebuild = error.refs;
      else if (error instanceof BalancePeriodMoved) {
        // The counters to rebuild were the old period's: the items are counted in the new one.
        toRebuild = [];
        forgetBalances(deps, usage);
      } else throw error;
    }
  }
  throw countersUnavailable("they keep changing");
}

/** A batch's items, dated (those sent without a time) at `receivedAt`. */
interface Batch {
  usage: EntitlementUsage;
  sessionId: string;
  items: UsageItem[];
  receivedAt: Date;
}

async function writeBatch(
  deps: UsageDependencies,
  { usage, sessionId, items, receivedAt }: Batch,
  { checkDuplicates, waitForPeriods }: Attempt,
): Promise<{ acceptedCount: number; duplicateCount: number }> {
  const now = deps.clock.now();
  let reservations: Reservation[] = [];
  let remember = () => {};
  let acceptedCount: number;
  try {
    acceptedCount = await inManagedTransaction(deps.dataSource, {}, async (manager) => {
      // A transaction run again (after a deadlock) gives back what its earlier run reserved.
      await releaseAll(deps, reservations);
      reservations = [];
      const fresh = checkDuplicates ? await unrecorded(deps, manager, sessionId, items) : items;
      const tooOld = fresh.flatMap((item) => (item.tooOld ? [item.tooOld] : []));
      if (tooOld.length > 0) throw invalidItems(tooOld);
      const rows = fresh.map((item) => recordOf(usage, sessionId, item, now));
      const stored = await deps.store.insertRecords(manager, rows, !checkDuplicates);
      if (stored !== rows.length) throw new HasDuplicates();
      reservations = await reserveAll(deps, manager, fresh, waitForPeriods);
      remember = await deps.statusEvents.record(
        manager,
        reservations.map(({ ref, reserved }) => ({
          ref,
          valueMicro: reserved.after,
          limitMicro: reserved.limit,
          generation: reserved.generation,
          backDated:
            (ref.periodEnd !== null && ref.periodEnd <= receivedAt) ||
            (ref.asset.metered !== undefined && ref.periodStart > receivedAt),
        })),
      );
      return fresh.length;
    });
  } catch (error) {
    if (error instanceof CommitInDoubt) {
      const refs = reservations.map(({ ref }) => ref);
      throw await recountAfterDoubt({ ...deps, rebuild: (ref) => deps.counters.rebuild(ref) }, error, refs);
    }
    await releaseAll(deps, reservations);
    throw error;
  }
  // Committed: nothing after this point may give the reservations back.
  remember();
  return { acceptedCount, duplicateCount: items.length - acceptedCount };
}

async function unrecorded(
  deps: UsageDependencies,
  manager: EntityManager,
  sessionId: string,
  items: UsageItem[],
): Promise<UsageItem[]> {
  const recorded = await deps.store.recordedTransactionIds(
    manager,
    sessionId,
    items.map((item) => item.transactionId),
  );
  return items.filter((item) => !recorded.has(item.transactionId));
}

/**
 * Reserves each counter's share of the items, at the generation share-locked in this transaction; throws the
 * refusal of the first counter that refuses, after giving back what was reserved. Unless `waitForPeriods`, a
 * period's row held by another transaction is passed over (MySQL), and the batch is to be written again waiting.
 */
async function reserveAll(
  deps: UsageDependencies,
  manager: EntityManager,
  items: UsageItem[],
  waitForPeriods: boolean,
): Promise<Reservation[]> {
  const shares = sharesOf(items);
  if (shares.length === 0) return [];
  const passOver = !waitForPeriods && deps.store.dialect === "mysql";
  const generations = await deps.store.lockGenerations(
    manager,
    shares.map((share) => share.ref),
    passOver,
  );
  const missing = shares.filter((share) => !generations.has(periodName(share.ref.assetId, share.ref.periodStart)));
  if (missing.length > 0 && passOver) await throwIfHeld(deps, manager, missing);
  if (missing.length > 0) throw new CountersMissing(missing.map((share) => ({ ref: share.ref, generation: -1 })));
  const reservations: Reservation[] = [];
  const lost: { ref: MeterRef; generation: number }[] = [];
  try {
    for (const { ref, amountMicro } of shares) {
      const generation = generations.get(periodName(ref.assetId, ref.periodStart)) as number;
      const outcome = await deps.counters.meters.reserve({
        key: ref.key,
        amount: amountMicro,
        mode: ref.mode,
        cap: ref.cap,
        generation,
      });
      if (outcome.kind === "missing") lost.push({ ref, generation });
      else if (outcome.kind === "refused") throw refusal(ref);
      else reservations.push({ ref, reserved: outcome, amountMicro });
    }
    // Every lost counter at once: they are rebuilt together before the batch is written again.
    if (lost.length > 0) throw new CountersMissing(lost);
    return reservations;
  } catch (error) {
    await releaseAll(deps, reservations);
    throw error;
  }
}

/** Throws PeriodsHeld when a period the skip-locked read passed over has a row: another transaction holds it. */
async function throwIfHeld(deps: UsageDependencies, manager: EntityManager, missing: { ref: MeterRef }[]) {
  const withRows = await deps.store.periodsWithRows(
    manager,
    missing.map(({ ref }) => ref),
  );
  if (withRows.size > 0) throw new PeriodsHeld();
}

/** Per counter, the amount the items add: their sum, or their highest for a peak counter. */
function sharesOf(items: UsageItem[]): { ref: MeterRef; amountMicro: number }[] {
  const shares = new Map<string, { ref: MeterRef; amountMicro: number }>();
  for (const item of items) {
    if (!item.ref) continue;
    const name = periodName(item.ref.assetId, item.ref.periodStart);
    const share = shares.get(name);
    if (!share) shares.set(name, { ref: item.ref, amountMicro: item.amountMicro });
    else if (item.ref.mode === "peak") share.amountMicro = Math.max(share.amountMicro, item.amountMicro);
    else share.amountMicro += item.amountMicro;
  }
  return [...shares.values()];
}

function refusal(ref: MeterRef): DomainError {
  const metric = ref.asset.metricName;
  if (ref.cap === MAX_EXACT_TOTAL_MICRO) {
    return new DomainError(
      "permission-denied",
      `usage of ${metric} would take its total past ${fromMicro(MAX_EXACT_TOTAL_MICRO)}, the most kept exactly; ` +
        "nothing was recorded",
      { slug: "usage-blocked" },
    );
  }
  if (ref.balance) {
    return new DomainError("permission-denied", `not enough credits left for ${metric}; nothing was recorded`, {
      slug: "credits-exhausted",
    });
  }
  return new DomainError(
    "permission-denied",
    `usage of ${metric} would fall in a tier whose policy is Block; nothing was recorded`,
    { slug: "usage-blocked" },
  );
}

function recordOf(usage: EntitlementUsage, sessionId: string, item: UsageItem, now: Date): UsageRecordRow {
  return {
    providerId: usage.providerId,
    entitlementId: usage.entitlementId,
    assetId: item.asset.id,
    sessionId,
    transactionId: item.transactionId,
    kind: RECORD_KIND.transaction,
    amountMicro: item.amountMicro,
    periodStart: item.ref?.periodStart ?? item.occurredAt,
    occurredAt: item.occurredAt,
    recordedAt: now,
  };
}

function forgetBalances(deps: UsageDependencies, usage: EntitlementUsage): void {
  for (const asset of usage.assets) if (asset.balance) deps.counters.balanceMoved(asset.id);
}

async function releaseAll(deps: UsageDependencies, reservations: Reservation[]): Promise<void> {
  for (const { ref, reserved, amountMicro } of reservations) {
    await deps.counters.meters.release(ref.key, reserved.generation, amountMicro, ref.mode).catch((error: Error) => {
      deps.logger.warn({ err: { message: error.message } }, "could not give back a usage reservation");
    });
  }
}
