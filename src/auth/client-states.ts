import type { Clock } from "../platform/clock.js";
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
  private readonly entries = new Map<string, { state: ClientState | null; loadedAtMs: number }>();
  /** Bumped by every invalidation, so a load that raced one is not cached. */
  private epoch = 0;

  private constructor(
    private readonly load: (clientId: string) => Promise<ClientState | null>,
    private readonly bus: InvalidationBus,
    private readonly clock: Clock,
  ) {}

  static async create(
    load: (clientId: string) => Promise<ClientState | null>,
    bus: InvalidationBus,
    clock: Clock,
  ): Promise<ClientStates> {
    const states = new ClientStates(load, bus, clock);
    await bus.subscribe(
      CLIENT_CHANGED_CHANNEL,
      (clientId) => states.forget(clientId),
      () => states.forgetAll(),
    );
    return states;
  }

  async get(clientId: string): Promise<ClientState | null> {
    const now = this.clock.now().getTime();
    const cached = this.entries.get(clientId);
    if (cached && now - cached.loadedAtMs < CLIENT_STATE_MAX_AGE_MS && this.bus.listening) return cached.state;
    const epoch = this.epoch;
    const state = await this.load(clientId);
    if (epoch === this.epoch && this.bus.listening) this.remember(clientId, state, now);
    return state;
  }

  /** Tells every instance (this one included) that the client changed. */
  async changed(clientId: string): Promise<void> {
    this.forget(clientId);
    await this.bus.publish(CLIENT_CHANGED_CHANNEL, clientId);
  }

  private remember(clientId: string, state: ClientState | null, now: number): void {
    this.entries.delete(clientId);
    this.entries.set(clientId, { state, loadedAtMs: now });
    if (this.entries.size > CAPACITY) this.entries.delete(this.entries.keys().next().value as string);
  }

  private forget(clientId: string): void {
    this.epoch++;
    this.entries.delete(clientId);
  }

  private forgetAll(): void {
    this.epoch++;
    this.entries.clear();
  }
}
