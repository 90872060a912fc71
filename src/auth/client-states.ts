import type { Clock } from "../platform/clock.js";
import { InvalidatedCache } from "../platform/invalidated-cache.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { ClientRow } from "./entities.js";

/** What token checks need to know of a client. */
export type ClientState = Pick<ClientRow, "clientId" | "providerId" | "disabled" | "tokenGeneration">;

export const CLIENT_CHANGED_CHANNEL = "client-changed";
const CAPACITY = 10_000;
/**
 * A bound on staleness should an invalidation never arrive (published while Redis was down, or written by
 * the CLI on an embedded install, which shares no process with the server).
 */
export const CLIENT_STATE_MAX_AGE_MS = 30_000;

/**
 * Each client's revocation state (token generation, disabled) in memory, read from the database on a miss and
 * dropped on every instance when the client changes: the change is published on the invalidation bus.
 * While the bus is not listening, nothing is cached.
 */
export class ClientStates {
  private constructor(
    private readonly load: (clientId: string) => Promise<ClientState | null>,
    private readonly cache: InvalidatedCache<ClientState | null>,
  ) {}

  static async create(
    load: (clientId: string) => Promise<ClientState | null>,
    bus: InvalidationBus,
    clock: Clock,
  ): Promise<ClientStates> {
    const cache = await InvalidatedCache.create<ClientState | null>({
      channel: CLIENT_CHANGED_CHANNEL,
      bus,
      clock,
      capacity: CAPACITY,
      maxAgeMs: CLIENT_STATE_MAX_AGE_MS,
    });
    return new ClientStates(load, cache);
  }

  get(clientId: string): Promise<ClientState | null> {
    return this.cache.get(clientId, () => this.load(clientId));
  }

  /** Tells every instance (this one included) that the client changed. */
  changed(clientId: string): Promise<void> {
    return this.cache.changed(clientId);
  }
}
