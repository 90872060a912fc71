import type { DataSource } from "typeorm";
import type { Clock } from "../platform/clock.js";
import { readSerially } from "../platform/database.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { Logger } from "../platform/logger.js";
import { SubscriptionStore } from "./subscription-store.js";

export const SUBSCRIPTION_CHANGED_CHANNEL = "webhook-subscription-changed";
const CAPACITY = 10_000;
/** A bound on staleness should an invalidation never arrive (published while Redis was down, say). */
const MAX_AGE_MS = 30_000;

/** What a subscription grants its callback tokens now: null once it is deleted (or never was). */
interface Grant {
  providerId: string;
  clientId: string;
  scopes: readonly string[];
}

/** The claims of a callback token that its subscription must still grant. */
export interface CallbackTokenClaims {
  subscriptionId: string;
  clientId: string;
  providerId: string;
  scopes: readonly string[];
}

/**
 * What each subscription's callback tokens may still do, read from the database on a miss and dropped on every
 * instance when the subscription changes: a token issued for a subscription since deleted, or whose callback
 * scopes or the client that set them changed, is refused before it expires.
 */
export class CallbackGrants {
  private constructor(
    private readonly subscriptions: SubscriptionStore,
    private readonly dataSource: DataSource,
    private readonly cache: InvalidatedCache<Grant | null>,
    private readonly logger: Pick<Logger, "warn">,
  ) {}

  static async create(
    dataSource: DataSource,
    bus: InvalidationBus,
    clock: Clock,
    logger: Pick<Logger, "warn">,
  ): Promise<CallbackGrants> {
    const cache = await InvalidatedCache.create<Grant | null>({
      channel: SUBSCRIPTION_CHANGED_CHANNEL,
      bus,
      clock,
      capacity: CAPACITY,
      maxAgeMs: MAX_AGE_MS,
    });
    return new CallbackGrants(new SubscriptionStore(dataSource), dataSource, cache, logger);
  }

  /** Whether the token's subscription still grants all the token claims, to the same client and provider. */
  async stillGrants(claims: CallbackTokenClaims): Promise<boolean> {
    const grant = await this.cache.get(claims.subscriptionId, () => this.load(claims.subscriptionId));
    return (
      grant !== null &&
      grant.providerId === claims.providerId &&
      grant.clientId === claims.clientId &&
      claims.scopes.every((scope) => grant.scopes.includes(scope))
    );
  }

  /**
   * Tells every instance (this one included) that the subscription changed. The change is committed already: when
   * the bus cannot say so, the other instances see it within MAX_AGE_MS.
   */
  async changed(subscriptionId: string): Promise<void> {
    await this.cache.changed(subscriptionId).catch((error: Error) => {
      this.logger.warn(
        { err: { message: error.message }, subscriptionId },
        "could not tell other instances of a webhook subscription change",
      );
    });
  }

  private async load(subscriptionId: string): Promise<Grant | null> {
    const found = await readSerially(this.dataSource, () =>
      this.subscriptions.findAnyOf(this.dataSource.manager, [subscriptionId]),
    );
    const row = found.get(subscriptionId);
    if (!row || row.deletedAt) return null;
    return {
      providerId: row.providerId,
      clientId: row.callbackClientId,
      scopes: JSON.parse(row.callbackScopes) as string[],
    };
  }
}
