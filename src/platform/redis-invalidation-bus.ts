import { createClient, type RedisClientType } from "redis";
import type { InvalidationBus } from "./invalidation-bus.js";
import type { Logger } from "./logger.js";

const CHANNEL_PREFIX = "provision:invalidate:";
/** At start-up, give up after this many failed attempts (about 3 s) rather than wait forever. */
const INITIAL_CONNECT_RETRIES = 5;

/** Redis pub/sub on two connections of its own (a subscribed connection can do nothing else). */
export class RedisInvalidationBus implements InvalidationBus {
  private readonly resets: (() => void)[] = [];

  private constructor(
    private readonly publisher: RedisClientType,
    private readonly subscriber: RedisClientType,
  ) {
    // Messages published while the subscriber was away are lost: every cache starts over.
    subscriber.on("ready", () => {
      for (const reset of this.resets) reset();
    });
  }

  static async connect(url: string, logger: Logger): Promise<RedisInvalidationBus> {
    const connect = async (role: string) => {
      let everReady = false;
      const client: RedisClientType = createClient({
        url,
        disableOfflineQueue: true,
        socket: {
          connectTimeout: 5000,
          reconnectStrategy: (retries: number, cause: Error) =>
            !everReady && retries >= INITIAL_CONNECT_RETRIES ? cause : Math.min(100 * 2 ** retries, 5000),
        },
      });
      let lastError = "";
      client.on("error", (error: Error) => {
        if (error.message !== lastError) logger.warn({ err: { message: error.message }, role }, "redis bus error");
        lastError = error.message;
      });
      client.on("ready", () => {
        everReady = true;
        lastError = "";
      });
      await client.connect();
      return client;
    };
    const publisher = await connect("publisher");
    try {
      return new RedisInvalidationBus(publisher, await connect("subscriber"));
    } catch (error) {
      await publisher.close();
      throw error;
    }
  }

  get listening(): boolean {
    return this.subscriber.isReady;
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.publisher.publish(CHANNEL_PREFIX + channel, message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void> {
    this.resets.push(onReset);
    await this.subscriber.subscribe(CHANNEL_PREFIX + channel, (message) => onMessage(message));
  }

  async close(): Promise<void> {
    for (const client of [this.subscriber, this.publisher]) if (client.isOpen) await client.close();
  }
}
