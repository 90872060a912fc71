import type { DataSource } from "typeorm";
import { ProviderEntity } from "../auth/entities.js";
import type { ProviderNotices } from "../auth/provider-notices.js";
import type { Clock } from "../platform/clock.js";
import { readSerially } from "../platform/database.js";

/** How long an instance keeps a provider's notices: `providers update` shows in licenses within this. */
export const PROVIDER_NOTICES_KEPT_MS = 60_000;
const MOST_PROVIDERS_KEPT = 10_000;

/** Each provider's copyright, URL and email as its licenses carry them, read at most once a minute per instance. */
export class ProviderNoticesCache {
  private readonly kept = new Map<string, { notices: ProviderNotices; until: number }>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
  ) {}

  async of(providerId: string): Promise<ProviderNotices> {
    const now = this.clock.now().getTime();
    const kept = this.kept.get(providerId);
    if (kept && kept.until > now) return kept.notices;
    const row = await readSerially(this.dataSource, () =>
      this.dataSource.getRepository(ProviderEntity).findOneBy({ id: providerId }),
    );
    const notices = { copyright: row?.copyright ?? null, url: row?.url ?? null, email: row?.email ?? null };
    if (this.kept.size >= MOST_PROVIDERS_KEPT) this.kept.clear();
    this.kept.set(providerId, { notices, until: now + PROVIDER_NOTICES_KEPT_MS });
    return notices;
  }
}
