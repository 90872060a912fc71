import type { RedisClientType } from "redis";
import type { InvalidationBus } from "./invalidation-bus.js";
import type { Logger } from "./logger.js";
import { connectRedis, withinDeadline } from "./redis-connection.js";

const CHANNEL_PREFIX = "provision:invalidate:";
const PUBLISH_DEADLINE_MS = 1000;

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
    const publisher = await connectRedis(url, logger, "bus publisher");
    try {
      return new RedisInvalidationBus(publisher, await connectRedis(url, logger, "bus subscriber"));
    } catch (error) {
      await publisher.close();
      throw error;
    }
  }

  get listening(): boolean {
    return this.subscriber.isReady;
  }

  async publish(channel: string, message: string): Promise<void> {
    await withinDeadline(this.publisher.publish(CHANNEL_PREFIX + channel, message), PUBLISH_DEADLINE_MS);
  }

  async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void): Promise<void> {
    this.resets.push(onReset);
    await this.subscriber.subscribe(CHANNEL_PREFIX + channel, (message) => onMessage(message));
  }

  async close(): Promise<void> {
    for (const client of [this.subscriber, this.publisher]) if (client.isOpen) await client.close();
  }
}
