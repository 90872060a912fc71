import type { DataSource } from "typeorm";
import { inTransaction } from "../platform/database.js";
import type { Logger } from "../platform/logger.js";
import type { UsageMeters } from "../platform/usage-meters.js";
import type { MeterRef, Reserved } from "./meter-counters.js";
import type { UsageStatusEvents } from "./usage-status-events.js";
import { periodName, type UsageRecordRow, type UsageStore } from "./usage-store.js";

/** A pre-allocation reserved in its counter, to be recorded before it is answered. */
export interface Grant {
  ref: MeterRef;
  reserved: Reserved;
  amountMicro: number;
  record: UsageRecordRow;
}

/** Recorded; or not, because its counter was rebuilt since (reserve it again). */
export type GrantOutcome = { written: true } | { written: false; generation: number };

interface Pending {
  grant: Grant;
  resolve: (outcome: GrantOutcome) => void;
  reject: (error: unknown) => void;
}

export interface GrantWriterOptions {
  dataSource: DataSource;
  store: UsageStore;
  meters: UsageMeters;
  statusEvents: UsageStatusEvents;
  logger: Logger;
  /** Transactions writing at once; grants arriving meanwhile wait and are written together. */
  maxInFlight?: number;
  maxBatch?: number;
}

/**
 * Group commit for pre-allocations: a granted amount is in the database before it is answered, and the grants
 * arriving while a transaction is under way share the next one. A grant whose counter's generation is no longer
 * the period row's was counted by a rebuild that did not see it: it is not written, and its caller reserves again.
 * A transaction that fails gives every reservation in it back.
 */
export class GrantWriter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  constructor(private readonly options: GrantWriterOptions) {
    this.maxInFlight = options.maxInFlight ?? 2;
    this.maxBatch = options.maxBatch ?? 500;
  }

  write(grant: Grant): Promise<GrantOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ grant, resolve, reject });
      this.next();
    });
  }

  /** Resolves once every grant given so far is written (or failed). */
  async close(): Promise<void> {
    while (this.inFlight > 0 || this.queue.length > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  private next(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.next();
      });
    }
  }

  private async flush(batch: Pending[]): Promise<void> {
    const { dataSource, store, statusEvents } = this.options;
    let remember = () => {};
    let current: { stillCurrent: Set<Pending>; generations: Map<string, number> };
    try {
      current = await inTransaction(dataSource, async (manager) => {
        const generations = await store.lockGenerations(manager, distinctPeriods(batch));
        const stillCurrent = batch.filter(
          ({ grant }) =>
            generations.get(periodName(grant.ref.assetId, grant.ref.periodStart)) === grant.reserved.generation,
        );
        await store.insertRecords(
          manager,
          stillCurrent.map(({ grant }) => grant.record),
          false,
        );
        remember = await statusEvents.record(
          manager,
          stillCurrent.map(({ grant }) => ({
            ref: grant.ref,
            valueMicro: grant.reserved.after,
            limitMicro: grant.reserved.limit,
            generation: grant.reserved.generation,
          })),
        );
        return { stillCurrent: new Set(stillCurrent), generations };
      });
    } catch (error) {
      await this.releaseAll(batch);
      for (const pending of batch) pending.reject(error);
      return;
    }
    // Committed: nothing after this point may give the reservations back.
    remember();
    for (const pending of batch) {
      if (current.stillCurrent.has(pending)) pending.resolve({ written: true });
      else pending.resolve({ written: false, generation: generationOf(current.generations, pending.grant.ref) });
    }
  }

  private async releaseAll(batch: Pending[]): Promise<void> {
    for (const { grant } of batch) {
      await this.options.meters
        .release(grant.ref.key, grant.reserved.generation, grant.amountMicro, grant.ref.mode)
        .catch((error: Error) =>
          this.options.logger.warn({ err: { message: error.message } }, "could not give back a usage reservation"),
        );
    }
  }
}

function distinctPeriods(batch: Pending[]): { assetId: string; periodStart: Date }[] {
  const periods = new Map<string, { assetId: string; periodStart: Date }>();
  for (const { grant } of batch) {
    periods.set(periodName(grant.ref.assetId, grant.ref.periodStart), grant.ref);
  }
  return [...periods.values()];
}

/** The period row's generation; -1 when it has none (a rebuild makes one). */
function generationOf(generations: Map<string, number>, ref: MeterRef): number {
  return generations.get(periodName(ref.assetId, ref.periodStart)) ?? -1;
}
