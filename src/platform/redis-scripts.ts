import { createHash } from "node:crypto";
import type { RedisClientType } from "@redis/client";

export interface ScriptCall {
  keys: string[];
  arguments: string[];
}

const shas = new Map<string, string>();

/**
 * Runs a Lua script by EVALSHA, sending its text (EVAL) only when Redis does not hold it yet (first use, a
 * restart, SCRIPT FLUSH): Redis then neither reads nor hashes the script on every call.
 */
export async function runScript(client: RedisClientType, script: string, call: ScriptCall): Promise<unknown> {
  try {
    return await client.evalSha(shaOf(script), call);
  } catch (error) {
    if (!String((error as Error).message).startsWith("NOSCRIPT")) throw error;
    return client.eval(script, call);
  }
}

function shaOf(script: string): string {
  let sha = shas.get(script);
  if (!sha) {
    sha = createHash("sha1").update(script).digest("hex");
    shas.set(script, sha);
  }
  return sha;
}

/**
 * The client as a library that sends its scripts by EVAL sees it (rate-limiter-flexible), with EVAL run through
 * runScript. Every other member is the client's own, its methods bound to it once (node-redis reads private
 * fields).
 */
export function scriptCachingClient(client: RedisClientType): RedisClientType {
  const members = new Map<string | symbol, unknown>([
    ["eval", (script: string, call: ScriptCall) => runScript(client, script, call)],
  ]);
  return new Proxy(client, {
    get(target, property) {
      if (members.has(property)) return members.get(property);
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const bound = value.bind(target);
      members.set(property, bound);
      return bound;
    },
  });
}
