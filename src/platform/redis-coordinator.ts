import { createClient, type RedisClientType } from "redis";
import type { Coordinator, RateDecision } from "./coordinator.js";
import type { Logger } from "./logger.js";

/** At start-up, give up after this many failed attempts (about 3 s) rather than wait forever. */
const INITIAL_CONNECT_RETRIES = 5;

/** One hit in a fixed window: INCR, starting the window's expiry on the first hit. Answers {count, ms left}. */
const FIXED_WINDOW_HIT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

/** The count of a window and its ms left, or {0, 0}, in one round trip. */
const WINDOW_PEEK = `
local count = redis.call('GET', KEYS[1])
if not count then return {0, 0} end
return {tonumber(count), redis.call('PTTL', KEYS[1])}
`;

/** One hash tag per rate key, so each script touches one slot (Redis Cluster). */
function rateKey(key: string): string {
  return `provision:{rate:${key}}`;
}

/** How long one Redis command may take before the caller treats Redis as unavailable. */
const COMMAND_DEADLINE_MS = 1000;

async function withDeadline<T>(command: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      command,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`redis did not answer within ${COMMAND_DEADLINE_MS} ms`)),
          COMMAND_DEADLINE_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export class RedisCoordinator implements Coordinator {
  readonly kind = "redis" as const;
  private readonly client: RedisClientType;

  private constructor(client: RedisClientType) {
    this.client = client;
  }

  /** Connects, retrying in the background after a lost connection; readiness reports while it is down. */
  static async connect(url: string, logger: Logger): Promise<RedisCoordinator> {
    let everReady = false;
    const client: RedisClientType = createClient({
      url,
      // While disconnected, commands fail at once rather than queue: callers decide how to degrade.
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 5000,
        reconnectStrategy: (retries: number, cause: Error) =>
          !everReady && retries >= INITIAL_CONNECT_RETRIES ? cause : Math.min(100 * 2 ** retries, 5000),
      },
    });
    let lastError = "";
    client.on("error", (error: Error) => {
      if (error.message !== lastError) logger.warn({ err: { message: error.message } }, "redis connection error");
      lastError = error.message;
    });
    client.on("ready", () => {
      everReady = true;
      lastError = "";
    });
    try {
      await client.connect();
    } catch (error) {
      throw new Error(`REDIS_URL is unreachable: ${(error as Error).message}`);
    }
    return new RedisCoordinator(client);
  }

  async ping(): Promise<void> {
    if (!this.client.isReady) throw new Error("redis is not connected");
    await withDeadline(this.client.ping());
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    const [count, ttl] = (await withDeadline(
      this.client.eval(FIXED_WINDOW_HIT, { keys: [rateKey(key)], arguments: [String(windowMs)] }),
    )) as [number, number];
    return { allowed: count <= limit, count, retryAfterMs: ttl };
  }

  async peek(key: string): Promise<{ count: number; retryAfterMs: number }> {
    const [count, ttl] = (await withDeadline(
      this.client.eval(WINDOW_PEEK, { keys: [rateKey(key)], arguments: [] }),
    )) as [number, number];
    return { count, retryAfterMs: ttl };
  }

  async close(): Promise<void> {
    if (this.client.isOpen) await this.client.close();
  }
}
