import type { DataSource } from "typeorm";
import { ProviderEntity } from "../auth/entities.js";
import type { ProviderNotices } from "../auth/provider-notices.js";
import type { Clock } from "../platform/clock.js";
import { readSerially } from "../platform/database.js";
import type { Logger } from "../platform/logger.js";

/** How long an instance keeps a provider's notices: `providers update` shows in licenses within this. */
export const PROVIDER_NOTICES_KEPT_MS = 60_000;
const MOST_PROVIDERS_KEPT = 10_000;
const NONE: ProviderNotices = { copyright: null, url: null, email: null };

interface Kept {
  notices: ProviderNotices;
  until: number;
  /** The read under way, shared by the activations that need it meanwhile. */
  reading?: Promise<ProviderNotices>;
}

/**
 * Each provider's copyright, URL and email as its licenses carry them, read at most once a minute per instance.
 * Read after an activation committed, so a read that fails answers what was known (nothing, the first time) rather
 * than failing an activation that took its seat.
 */
export class ProviderNoticesCache {
  private readonly kept = new Map<string, Kept>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly logger: Pick<Logger, "warn">,
  ) {}

  of(providerId: string): ProviderNotices | Promise<ProviderNotices> {
    const now = this.clock.now().getTime();
    const kept = this.kept.get(providerId);
    if (kept && kept.until > now) return kept.notices;
    if (kept?.reading) return kept.reading;
    const known = kept?.notices ?? NONE;
    const entry: Kept = { notices: known, until: 0 };
    entry.reading = this.read(providerId).then(
      (notices) => {
        this.keep(providerId, { notices, until: this.clock.now().getTime() + PROVIDER_NOTICES_KEPT_MS });
        return notices;
      },
      (error: unknown) => {
        this.logger.warn({ err: { message: (error as Error).message } }, "could not read the provider's notices");
        this.keep(providerId, { notices: known, until: 0 });
        return known;
      },
    );
    this.keep(providerId, entry);
    return entry.reading;
  }

  private keep(providerId: string, entry: Kept): void {
    if (this.kept.size >= MOST_PROVIDERS_KEPT && !this.kept.has(providerId)) this.kept.clear();
    this.kept.set(providerId, entry);
  }

  private async read(providerId: string): Promise<ProviderNotices> {
    const row = await readSerially(this.dataSource, () =>
      this.dataSource.getRepository(ProviderEntity).findOneBy({ id: providerId }),
    );
    return { copyright: row?.copyright ?? null, url: row?.url ?? null, email: row?.email ?? null };
  }
}
