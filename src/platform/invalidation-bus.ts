/**
 * Tells every instance that cached data changed: Redis pub/sub in production (`redis-invalidation-bus.ts`),
 * in-process for the embedded default. Messages can be lost while an instance is disconnected, so a cache
 * fed by the bus trusts it only while `listening` and starts over from empty on `onReset`.
 */
export interface InvalidationBus {
  /** True while messages published anywhere reach this instance. */
  readonly listening: boolean;
  publish(channel: string, message: string): Promise<void>;
  /** Resolves once messages reach `onMessage`; `onReset` runs when some may have been missed (a reconnect). */
  subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void>;
  close(): Promise<void>;
}

type Listener = { onMessage: (message: string) => void; onReset: () => void };

/** One process: delivery is a function call, nothing is ever missed. */
export class MemoryInvalidationBus implements InvalidationBus {
  readonly listening = true;
  private readonly listeners = new Map<string, Listener[]>();

  async publish(channel: string, message: string): Promise<void> {
    for (const listener of this.listeners.get(channel) ?? []) listener.onMessage(message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void> {
    this.listeners.set(channel, [...(this.listeners.get(channel) ?? []), { onMessage, onReset }]);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
