import type { DataSource } from "typeorm";
import { GroupCommit } from "../platform/group-commit.js";
import { Lanes } from "../platform/lanes.js";
import type { Logger } from "../platform/logger.js";
import { CommitInDoubt } from "../platform/lost-connections.js";
import { type BatchedTransaction, inBatchedTransaction } from "../platform/statement-batch.js";
import type { UsageMeters } from "../platform/usage-meters.js";
import { recountAfterDoubt } from "./commit-in-doubt.js";
import type { MeterRef, Reserved } from "./meter-counters.js";
import type { UsageStatusEvents } from "./usage-status-events.js";
import { generationsOf, periodName, type UsageRecordRow, type UsageStore } from "./usage-store.js";

/** A pre-allocation reserved in its counter, to be recorded before it is answered. */
export interface Grant {
  ref: MeterRef;
  reserved: Reserved;
  amountMicro: number;
  record: UsageRecordRow;
}

/** Recorded; or not, because its counter was rebuilt since (reserve it again). */
export type GrantOutcome = { written: true } | { written: false; generation: number };

/** Not written: its period's row is held by another transaction, and the group passed it over. */
const PASSED_OVER = "passed over";
/** Written, or not: the COMMIT's answer was lost (its counter was recounted). */
type WriteOutcome = GrantOutcome | typeof PASSED_OVER | CommitInDoubt;

/** How a group's transaction sorted its grants, before its COMMIT. */
interface Sorted {
  current: Set<Grant>;
  passedOver: Set<Grant>;
  generations: Map<string, number>;
}
type Groups = GroupCommit<Grant, WriteOutcome>;
/** Lanes writing at once, however many periods are held elsewhere. */
const LANES_AT_ONCE = 2;

export interface GrantWriterOptions {
  dataSource: DataSource;
  store: UsageStore;
  meters: UsageMeters;
  statusEvents: UsageStatusEvents;
  logger: Logger;
  /** Rebuilds a counter from the records (see MeterCounters.rebuild). */
  rebuild: (ref: MeterRef) => Promise<void>;
  /** Transactions writing at once; grants arriving meanwhile wait and are written together. */
  maxInFlight?: number;
  maxBatch?: number;
  /** See GroupCommitOptions.gatherTurns. */
  gatherTurns?: number;
}

/**
 * Group commit for pre-allocations: a granted amount is in the database before it is answered, and the grants
 * arriving while a transaction is under way share the next one. A grant whose counter's generation is no longer
 * the period row's was counted by a rebuild that did not see it: it is not written, and its caller reserves again.
 * A transaction that fails gives every reservation in it back; one whose COMMIT's answer was lost recounts them.
 *
 * A period whose row another transaction holds exclusively (a counter rebuild summing a long period, a top-up, an
 * operator's session) is passed over, so that it holds up its own grants only: they wait for it in a lane of that
 * period's own, one transaction at a time, while it has grants waiting (two lanes at a time on an instance).
 */
export class GrantWriter {
  private readonly groups: Groups;
  private readonly lanes: Lanes<Grant, WriteOutcome>;

  constructor(private readonly options: GrantWriterOptions) {
    const groups = { weigh: () => 1, maxWeight: options.maxBatch ?? 500, gatherTurns: options.gatherTurns };
    this.groups = new GroupCommit((grants) => this.writeGroup(grants, true), {
      ...groups,
      maxInFlight: options.maxInFlight ?? 2,
    });
    this.lanes = new Lanes((grants) => this.writeGroup(grants, false), groups, LANES_AT_ONCE);
  }

  /** A lane never passes a grant over: the second turn of the loop is its last. */
  async write(grant: Grant): Promise<GrantOutcome> {
    const period = periodName(grant.ref.assetId, grant.ref.periodStart);
    let inLane = this.lanes.has(period);
    for (;;) {
      const outcome = inLane ? await this.lanes.submit(period, grant) : await this.groups.submit(grant);
      if (outcome instanceof CommitInDoubt) throw outcome;
      if (outcome !== PASSED_OVER) return outcome;
      inLane = true;
    }
  }

  /** Resolves once every grant given so far is written (or failed), in the groups and in the lanes. */
  async close(): Promise<void> {
    do {
      await this.groups.drained();
      await this.lanes.drained();
    } while (!this.groups.idle());
  }

  private async writeGroup(grants: Grant[], passOver: boolean): Promise<WriteOutcome[]> {
    const sorted: Partial<Sorted> = {};
    let remember: () => void;
    try {
      remember = await inBatchedTransaction(
        this.options.dataSource,
        (transaction) => this.writeInTransaction(transaction, grants, passOver, sorted),
        { gathered: true },
      );
    } catch (error) {
      if (!(error instanceof CommitInDoubt) || !sorted.current) {
        await this.releaseAll(grants);
        throw error;
      }
      const refs = [...sorted.current].map((grant) => grant.ref);
      return outcomesOf(grants, sorted as Sorted, await recountAfterDoubt(this.options, error, refs));
    }
    // Committed: nothing after this point may give the reservations back.
    remember();
    return outcomesOf(grants, sorted as Sorted);
  }

  /**
   * The grants whose counters' generations are current, written: the generations are read (share-locked) in one
   * batch, and the records go with the COMMIT in a second, unless a usage status may have changed (then the
   * status events are recorded between them): two round trips on MySQL for most groups. With `passOver`, a
   * period absent from the generations read (held elsewhere, or without a row yet) is passed over: its lane reads
   * it again, waiting.
   */
  private async writeInTransaction(
    transaction: BatchedTransaction,
    grants: Grant[],
    passOver: boolean,
    sorted: Partial<Sorted>,
  ): Promise<() => void> {
    const { store, statusEvents } = this.options;
    const [rows] = await transaction.run([store.lockGenerationsStatement(distinctPeriods(grants), passOver)]);
    const generations = generationsOf(rows);
    const passedOver = new Set(
      passOver ? grants.filter((grant) => !generations.has(periodName(grant.ref.assetId, grant.ref.periodStart))) : [],
    );
    const current = grants.filter(
      (grant) => generations.get(periodName(grant.ref.assetId, grant.ref.periodStart)) === grant.reserved.generation,
    );
    const inserts =
      current.length === 0
        ? []
        : [
            store.insertRecordsStatement(
              current.map((grant) => grant.record),
              false,
            ),
          ];
    const observations = current.map((grant) => ({
      ref: grant.ref,
      valueMicro: grant.reserved.after,
      limitMicro: grant.reserved.limit,
      generation: grant.reserved.generation,
    }));
    Object.assign(sorted, { current: new Set(current), passedOver, generations });
    let remember = () => {};
    if (statusEvents.mayRecord(observations)) {
      await transaction.run(inserts);
      remember = await statusEvents.record(await transaction.open(), observations);
    } else await transaction.commitWith(inserts);
    return remember;
  }

  private async releaseAll(grants: Grant[]): Promise<void> {
    for (const grant of grants) {
      await this.options.meters
        .release(grant.ref.key, grant.reserved.generation, grant.amountMicro, grant.ref.mode)
        .catch((error: Error) =>
          this.options.logger.warn({ err: { message: error.message } }, "could not give back a usage reservation"),
        );
    }
  }
}

/** Each grant's outcome as its group's transaction sorted it; the written ones' is `doubt` when it is given. */
function outcomesOf(grants: Grant[], sorted: Sorted, doubt?: CommitInDoubt): WriteOutcome[] {
  return grants.map((grant) => {
    if (sorted.current.has(grant)) return doubt ?? { written: true };
    if (sorted.passedOver.has(grant)) return PASSED_OVER;
    return { written: false, generation: generationOf(sorted.generations, grant.ref) };
  });
}

function distinctPeriods(grants: Grant[]): { assetId: string; periodStart: Date }[] {
  const periods = new Map<string, { assetId: string; periodStart: Date }>();
  for (const grant of grants) {
    periods.set(periodName(grant.ref.assetId, grant.ref.periodStart), grant.ref);
  }
  return [...periods.values()];
}

/** The period row's generation; -1 when it has none (a rebuild makes one). */
function generationOf(generations: Map<string, number>, ref: MeterRef): number {
  return generations.get(periodName(ref.assetId, ref.periodStart)) ?? -1;
}
