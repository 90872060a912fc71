import type { RedisClientType } from "@redis/client";
import { type Connecting, connectAll } from "./connect-all.js";
import type { InvalidationBus } from "./invalidation-bus.js";
import type { Logger } from "./logger.js";
import { connectRedis, withinDeadline } from "./redis-connection.js";

const CHANNEL_PREFIX = "provision:invalidate:";
const PUBLISH_DEADLINE_MS = 1000;
/** How long after a (re)connect the subscriptions are taken to stand again. */
const RESUBSCRIBE_SETTLE_MS = 1000;

/** Redis pub/sub on two connections of its own (a subscribed connection can do nothing else). */
export class RedisInvalidationBus implements InvalidationBus {
  private readonly resets: (() => void)[] = [];
  /** False from a (re)connect until the subscriptions surely stand again. */
  private settled = false;

  private constructor(
    private readonly publisher: RedisClientType,
    private readonly subscriber: RedisClientType,
  ) {
    // Messages published while the subscriber was away are lost, and node-redis subscribes again only after
    // "ready": caches start over now, cache nothing until the subscriptions stand, and start over once more.
    subscriber.on("ready", () => this.settleAfterConnect());
    this.settleAfterConnect();
  }

  private settleAfterConnect(): void {
    this.settled = false;
    this.reset();
    setTimeout(() => {
      this.settled = true;
      this.reset();
    }, RESUBSCRIBE_SETTLE_MS).unref();
  }

  /** Connects both at once; when either fails, the other is closed. */
  static async connect(url: string, logger: Logger): Promise<RedisInvalidationBus> {
    const client = (role: string): Connecting<RedisClientType> => ({
      connect: () => connectRedis(url, logger, role),
      close: (connected) => connected.close(),
    });
    const [publisher, subscriber] = await connectAll([client("bus publisher"), client("bus subscriber")]);
    return new RedisInvalidationBus(publisher, subscriber);
  }

  get listening(): boolean {
    return this.settled && this.subscriber.isReady;
  }

  private reset(): void {
    for (const reset of this.resets) reset();
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
