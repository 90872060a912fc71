import type { DataSource } from "typeorm";
import { dialectOf, inTransaction } from "../platform/database.js";
import { GroupCommit, SYNCHRONOUS_GATHER_TURNS } from "../platform/group-commit.js";
import type { NewSessionRecord, SessionRecordStore } from "./session-record-store.js";

/** Rows one transaction writes at most: the batches of five full requests. */
const MAX_GROUP_ROWS = 5000;
/** Transactions at once on MySQL (of the pool's 16 connections by default); SQLite writes one at a time anyway. */
const MYSQL_WRITES_IN_FLIGHT = 3;

/**
 * Stores batches of session records durably: a batch is answered once its rows are committed. Batches that
 * arrive while every write slot is busy are written next, together, in one transaction (group commit): one
 * commit for many requests. Each batch is inserted by statements of its own, so each learns exactly how many
 * of its rows were new; a failed transaction fails every batch in it, none of which is then stored.
 */
export class SessionRecordWriter {
  private readonly groups: GroupCommit<NewSessionRecord[], number>;

  constructor(
    dataSource: DataSource,
    readonly store: SessionRecordStore,
  ) {
    this.groups = new GroupCommit(
      (batches) =>
        inTransaction(
          dataSource,
          async (manager) => {
            const stored: number[] = [];
            for (const batch of batches) stored.push(await store.insertNew(manager, batch));
            return stored;
          },
          { gathered: true },
        ),
      {
        weigh: (batch) => batch.length,
        maxWeight: MAX_GROUP_ROWS,
        maxInFlight: dialectOf(dataSource) === "mysql" ? MYSQL_WRITES_IN_FLIGHT : 1,
        gatherTurns: dialectOf(dataSource) === "mysql" ? undefined : SYNCHRONOUS_GATHER_TURNS,
      },
    );
  }

  /** How many of `records` were new (not recorded before by transactionId), once committed. */
  write(records: NewSessionRecord[]): Promise<number> {
    return records.length === 0 ? Promise.resolve(0) : this.groups.submit(records);
  }
}
