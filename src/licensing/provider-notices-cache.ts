import type { DataSource } from "typeorm";
import { ProviderEntity } from "../auth/entities.js";
import { PROVIDER_CHANGED_CHANNEL, type ProviderNotices } from "../auth/provider-notices.js";
import type { Clock } from "../platform/clock.js";
import { readSerially } from "../platform/database.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { Logger } from "../platform/logger.js";

/**
 * How long an instance keeps a provider's notices: a `providers update` it was not told of (embedded, or Redis and
 * the invalidation log unreachable) shows in licenses within this.
 */
export const PROVIDER_NOTICES_KEPT_MS = 60_000;
const MOST_PROVIDERS_KEPT = 10_000;
const NONE: ProviderNotices = { copyright: null, url: null, email: null };

/**
 * Each provider's copyright, URL and email as its licenses carry them, read at most once a minute per instance.
 * Read after an activation committed, so a read that fails answers no notices rather than failing an activation
 * that took its seat.
 */
export class ProviderNoticesCache {
  private constructor(
    private readonly cache: InvalidatedCache<ProviderNotices>,
    private readonly dataSource: DataSource,
    private readonly logger: Pick<Logger, "warn">,
  ) {}

  static async create(options: {
    dataSource: DataSource;
    bus: InvalidationBus;
    clock: Clock;
    logger: Pick<Logger, "warn">;
  }): Promise<ProviderNoticesCache> {
    const cache = await InvalidatedCache.create<ProviderNotices>({
      channel: PROVIDER_CHANGED_CHANNEL,
      bus: options.bus,
      clock: options.clock,
      capacity: MOST_PROVIDERS_KEPT,
      maxAgeMs: PROVIDER_NOTICES_KEPT_MS,
    });
    return new ProviderNoticesCache(cache, options.dataSource, options.logger);
  }

  of(providerId: string): ProviderNotices | Promise<ProviderNotices> {
    return (
      this.cache.peek(providerId) ??
      this.cache
        .get(providerId, () => this.read(providerId))
        .catch((error: unknown) => {
          this.logger.warn({ err: { message: (error as Error).message } }, "could not read the provider's notices");
          return NONE;
        })
    );
  }

  private async read(providerId: string): Promise<ProviderNotices> {
    const row = await readSerially(this.dataSource, () =>
      this.dataSource.getRepository(ProviderEntity).findOneBy({ id: providerId }),
    );
    return { copyright: row?.copyright ?? null, url: row?.url ?? null, email: row?.email ?? null };
  }
}
