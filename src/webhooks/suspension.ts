import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { inTransaction, readSerially } from "../platform/database.js";
import type { ScheduledJob } from "../platform/scheduler.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";

/**
 * Suspends Active subscriptions whose deliveries have kept failing for `suspendAfterMs` (no success since the
 * first failure, as the deliveries that succeeded say: results written in one batch judge the subscription as it
 * was at their claim): their pending deliveries are parked, and are sent once the subscription is re-enabled and
 * verified again.
 */
export function suspensionJob(deps: WebhookDependencies, suspendAfterMs: number): ScheduledJob {
  return {
    name: "webhook-suspension",
    async run(now) {
      const { dataSource, subscriptions, deliveries } = deps;
      const since = deliveries.date(new Date(now.getTime() - suspendAfterMs));
      const failing = await readSerially(dataSource, () =>
        subscriptions.table.select(
          dataSource.manager,
          "state = ? AND failing_since IS NOT NULL AND failing_since <= ? AND deleted_at IS NULL",
          [SubscriptionState.ACTIVE, since],
        ),
      );
      for (const candidate of failing) {
        await inTransaction(dataSource, async (manager) => {
          const row = await subscriptions.find(manager, candidate.providerId, candidate.id, true);
          const cutoff = now.getTime() - suspendAfterMs;
          if (row?.state !== SubscriptionState.ACTIVE || !row.failingSince || row.failingSince.getTime() > cutoff)
            return;
          row.updatedAt = now;
          if (await deliveries.succeededSince(manager, row.id, row.failingSince)) {
            // Results recorded together may have left a failure's mark after a later success: not failing.
            row.failingSince = null;
            await subscriptions.update(manager, row);
            return;
          }
          row.state = SubscriptionState.SUSPENDED;
          await subscriptions.update(manager, row);
          await deliveries.parkPending(manager, row.id);
        });
      }
    },
  };
}
