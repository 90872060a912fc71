import type { RedisClientType } from "@redis/client";
import { withinDeadline } from "./redis-connection.js";
import { runScript } from "./redis-scripts.js";
import {
  METER_IDLE_TTL_MS,
  type MeterKey,
  type MeterMode,
  type ReserveOutcome,
  type ReserveRequest,
  type UsageMeters,
} from "./usage-meters.js";

const COMMAND_DEADLINE_MS = 1000;

/** ARGV: generation (-1: any), amount, mode (s|p), cap (-1: none, -2: the stored limit), ttl ms. */
const RESERVE = `
local h = redis.call('HMGET', KEYS[1], 'g', 'v', 'l')
if not h[1] then return {0} end
local g = tonumber(h[1])
local want = tonumber(ARGV[1])
if want >= 0 and g ~= want then return {0} end
local v = tonumber(h[2])
local l = tonumber(h[3]) or -1
local amount = tonumber(ARGV[2])
local after = v + amount
if ARGV[3] == 'p' then after = math.max(v, amount) end
local cap = tonumber(ARGV[4])
if cap == -2 then cap = l end
local function text(n) return string.format('%.0f', n) end
if cap >= 0 and after > cap then return {2, text(g), text(v), text(l)} end
if ARGV[3] == 'p' then
  if amount > v then redis.call('HSET', KEYS[1], 'v', ARGV[2]) end
else
  redis.call('HINCRBY', KEYS[1], 'v', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, text(g), text(v), text(after), text(l)}
`;

/** ARGV: generation, amount, mode. */
const RELEASE = `
if tonumber(redis.call('HGET', KEYS[1], 'g')) ~= tonumber(ARGV[1]) then return 0 end
if ARGV[3] == 'p' then return redis.call('DEL', KEYS[1]) end
redis.call('HINCRBY', KEYS[1], 'v', '-' .. ARGV[2])
return 1
`;

/** ARGV: generation, value, limit (-1: none), ttl ms. */
const LOAD = `
local g = tonumber(redis.call('HGET', KEYS[1], 'g'))
if g and g >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'g', ARGV[1], 'v', ARGV[2], 'l', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`;

/**
 * Counters in Redis, each a hash (generation, value, limit) changed only by Lua scripts. The key's hash tag is
 * the asset, so an asset's counters stay on one Redis Cluster slot.
 */
export class RedisUsageMeters implements UsageMeters {
  constructor(private readonly client: RedisClientType) {}

  async reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const cap = request.cap === undefined ? -1 : request.cap === "stored" ? -2 : request.cap;
    const reply = (await this.run(RESERVE, request.key, [
      request.generation ?? -1,
      request.amount,
      request.mode === "peak" ? "p" : "s",
      cap,
      METER_IDLE_TTL_MS,
    ])) as (number | string)[];
    // Numbers come back as text: node-redis reads integer replies near 2^53 inexactly.
    const [status, ...numbers] = reply.map(Number);
    if (status === 0) return { kind: "missing" };
    if (status === 2) return { kind: "refused", generation: numbers[0], value: numbers[1], limit: limitOf(numbers[2]) };
    return {
      kind: "reserved",
      generation: numbers[0],
      before: numbers[1],
      after: numbers[2],
      limit: limitOf(numbers[3]),
    };
  }

  async release(key: MeterKey, generation: number, amount: number, mode: MeterMode): Promise<void> {
    await this.run(RELEASE, key, [generation, amount, mode === "peak" ? "p" : "s"]);
  }

  async generationOf(key: MeterKey): Promise<number | null> {
    const generation = await withinDeadline(this.client.hGet(redisKeyOf(key), "g"), COMMAND_DEADLINE_MS);
    return generation === null || generation === undefined ? null : Number(generation);
  }

  async load(key: MeterKey, generation: number, value: number, limit: number | null): Promise<void> {
    await this.run(LOAD, key, [generation, value, limit ?? -1, METER_IDLE_TTL_MS]);
  }

  /** EVALSHA, loading the script on first use or after Redis forgot it (restart, SCRIPT FLUSH). */
  private run(script: string, key: MeterKey, args: (number | string)[]): Promise<unknown> {
    const call = { keys: [redisKeyOf(key)], arguments: args.map(String) };
    return withinDeadline(runScript(this.client, script, call), COMMAND_DEADLINE_MS);
  }
}

export function redisKeyOf(key: MeterKey): string {
  return `provision:meter:{${key.assetId}}:${key.periodStartMs}`;
}

function limitOf(stored: number): number | null {
  return stored < 0 ? null : stored;
}
