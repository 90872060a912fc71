import type { DataSource } from "typeorm";
import { writeSerially } from "../platform/database.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import { DELIVERY_STATUS, type DeliveryStore } from "./delivery-store.js";

const CHUNK = 500;
const DAY_MS = 86_400_000;

/**
 * Prunes succeeded and cancelled deliveries (their attempts with them) completed more than `retentionDays` ago,
 * then the events left without a delivery; failed deliveries are kept for requeue. In chunks, so no statement
 * holds many locks.
 */
export function retentionJob(dataSource: DataSource, deliveries: DeliveryStore, retentionDays: number): ScheduledJob {
  return {
    name: "webhook-retention",
    async run(now) {
      const cutoff = deliveries.date(new Date(now.getTime() - retentionDays * DAY_MS));
      await deleteInChunks(
        dataSource,
        "SELECT id FROM webhook_deliveries WHERE status IN (?, ?) AND completed_at < ? LIMIT ?",
        [DELIVERY_STATUS.succeeded, DELIVERY_STATUS.cancelled, cutoff],
        "webhook_deliveries",
      );
      await deleteInChunks(
        dataSource,
        "SELECT e.id FROM webhook_events e WHERE e.fanned_out_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) LIMIT ?",
        [cutoff],
        "webhook_events",
      );
    },
  };
}

async function deleteInChunks(dataSource: DataSource, select: string, parameters: unknown[], table: string) {
  for (;;) {
    const removed = await writeSerially(dataSource, async () => {
      const rows = (await dataSource.query(select, [...parameters, CHUNK])) as { id: string }[];
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => row.id);
      await dataSource.query(`DELETE FROM ${table} WHERE id IN (${ids.map(() => "?").join(", ")})`, ids);
      return ids.length;
    });
    if (removed < CHUNK) return;
  }
}
