import type { Clock } from "../platform/clock.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { Logger } from "../platform/logger.js";
import type { LicenseSessionRow } from "./entities.js";
import { LICENSE_TOKEN_CACHE_SIZE } from "./license-tokens.js";

export const SESSION_CHANGED_CHANNEL = "license-session-changed";
export const ENTITLEMENT_CHANGED_CHANNEL = "entitlement-changed";
/** A bound on staleness should an invalidation never arrive (published while Redis was down). */
const MAX_AGE_MS = 30_000;

/**
 * What check-in reads, per instance: each session's row and each entitlement's standing, dropped on every
 * instance when a write changes them (published once the write is committed). A missing row is not kept.
 */
export class LicensingCaches<Standing> {
  private constructor(
    readonly sessions: InvalidatedCache<LicenseSessionRow | null>,
    readonly standings: InvalidatedCache<Standing | null>,
    private readonly logger: Logger,
  ) {}

  static async create<Standing>(bus: InvalidationBus, clock: Clock, logger: Logger) {
    const common = { bus, clock, maxAgeMs: MAX_AGE_MS, keeps: (value: unknown) => value !== null };
    const sessions = await InvalidatedCache.create<LicenseSessionRow | null>({
      ...common,
      channel: SESSION_CHANGED_CHANNEL,
      capacity: LICENSE_TOKEN_CACHE_SIZE,
    });
    const standings = await InvalidatedCache.create<Standing | null>({
      ...common,
      channel: ENTITLEMENT_CHANGED_CHANNEL,
      capacity: 50_000,
    });
    return new LicensingCaches(sessions, standings, logger);
  }

  /** Once committed: the change stands even when other instances cannot be told (their copies expire). */
  async sessionsChanged(...sessionIds: string[]): Promise<void> {
    await this.sessions.changed(...sessionIds).catch((error: Error) => this.warn(error, "sessions"));
  }

  async entitlementChanged(entitlementId: string): Promise<void> {
    await this.standings.changed(entitlementId).catch((error: Error) => this.warn(error, "entitlement"));
  }

  private warn(error: Error, what: string) {
    this.logger.warn({ err: { message: error.message } }, `could not tell other instances of a ${what} change`);
  }
}
