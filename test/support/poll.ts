import { setTimeout as delay } from "node:timers/promises";

/**
 * Calls `probe` every `intervalMs` until it returns something other than undefined, and returns that; throws
 * after `timeoutMs` with `what` in the message. Bounded polling, for conditions with no event to wait on.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  { timeoutMs = 5000, intervalMs = 50 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(intervalMs);
  }
}
