import type { RedisClientType } from "@redis/client";
import RateLimiterRedis from "rate-limiter-flexible/lib/RateLimiterRedis.js";
import RLWrapperTimeouts from "rate-limiter-flexible/lib/RLWrapperTimeouts.js";
import { type Coordinator, limiterRegistry, type RateLimiter, type RateLimitOptions } from "./coordinator.js";
import type { Logger } from "./logger.js";
import { connectRedis, withinDeadline } from "./redis-connection.js";
import { scriptCachingClient } from "./redis-scripts.js";
import { RedisUsageMeters } from "./redis-usage-meters.js";

/** Where rate limits count: one prefix for Provision's keys, then the limiter's name. */
const RATE_KEY_PREFIX = "provision:rate";

/** How long one Redis command may take before the caller treats Redis as unavailable. */
const COMMAND_DEADLINE_MS = 1000;

export class RedisCoordinator implements Coordinator {
  readonly kind = "redis" as const;
  readonly rateLimiter: (options: RateLimitOptions) => RateLimiter;
  readonly meters: RedisUsageMeters;

  private constructor(private readonly client: RedisClientType) {
    this.rateLimiter = limiterRegistry((options) => redisRateLimiter(client, options));
    this.meters = new RedisUsageMeters(client);
  }

  /** Connects, retrying in the background after a lost connection; readiness reports while it is down. */
  static async connect(url: string, logger: Logger): Promise<RedisCoordinator> {
    return new RedisCoordinator(await connectRedis(url, logger, "coordinator"));
  }

  async ping(): Promise<void> {
    if (!this.client.isReady) throw new Error("redis is not connected");
    await this.client.ping();
  }

  /** Waits for commands in flight, but not for a Redis that stopped answering them. */
  async close(): Promise<void> {
    if (!this.client.isOpen) return;
    // Redis answers in order: once PING is answered, nothing sent before it is still in flight.
    const answering = this.client.isReady && (await answersWithin(this.client.ping(), COMMAND_DEADLINE_MS));
    if (answering) await this.client.close();
    else this.client.destroy();
  }
}

function answersWithin(command: Promise<unknown>, ms: number): Promise<boolean> {
  return withinDeadline(command, ms).then(
    () => true,
    () => false,
  );
}

/**
 * Counted by one Lua script per consume (INCRBY, and the window's expiry on its first point), so racing instances
 * never lose a count; sent by EVALSHA (rate-limiter-flexible would send its text with every call).
 */
function redisRateLimiter(client: RedisClientType, { name, points, durationSeconds }: RateLimitOptions): RateLimiter {
  const limiter = new RateLimiterRedis({
    storeClient: scriptCachingClient(client),
    // node-redis v4 and later: options objects rather than positional arguments.
    useRedisPackage: true,
    rejectIfRedisNotReady: true,
    keyPrefix: `${RATE_KEY_PREFIX}:${name}`,
    points,
    duration: durationSeconds,
  });
  return new RLWrapperTimeouts({ limiter, timeoutMs: COMMAND_DEADLINE_MS });
}
