import type { RedisClientType } from "@redis/client";
import RedisClientModule from "@redis/client/dist/lib/client/index.js";
import type { Logger } from "./logger.js";

/**
 * Every connection is made by one client class: node-redis builds a class with every command per distinct
 * options object given to `createClient` (about 20 ms of start-up each), and no connection here adds commands.
 */
const newClient = RedisClientModule.default.factory({});

/** At start-up, give up after this many failed attempts (about 3 s) rather than wait forever. */
const INITIAL_CONNECT_RETRIES = 5;
/** At start-up, a connection that has not answered a PING within this is given up too. */
const STARTUP_ANSWER_MS = 10_000;

/**
 * A connected node-redis client that retries in the background after a lost connection (each distinct error
 * logged once, naming `role`). While disconnected, commands fail at once rather than queue: callers decide how
 * to degrade.
 */
export async function connectRedis(url: string, logger: Logger, role: string): Promise<RedisClientType> {
  let everReady = false;
  const client: RedisClientType = newClient({
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
    if (error.message !== lastError) logger.warn({ err: { message: error.message }, role }, "redis connection error");
    lastError = error.message;
  });
  client.on("ready", () => {
    everReady = true;
    lastError = "";
  });
  try {
    // A server that takes the connection and answers nothing (a partition, a wedged process) fails the start too.
    await withinDeadline(
      client.connect().then(() => client.ping()),
      STARTUP_ANSWER_MS,
    );
  } catch (error) {
    if (client.isOpen) client.destroy();
    throw new Error(`REDIS_URL is unreachable: ${(error as Error).message}`);
  }
  return client;
}

/** Fails `command` when Redis has not answered within `ms`: a Redis that stopped answering never hangs a caller. */
export async function withinDeadline<T>(command: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      command,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`redis did not answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
