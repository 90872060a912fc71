import type { Logger } from "./logger.js";

/** While a failure lasts, its warning is logged at most this often (per logger and message). */
export const WARNING_INTERVAL_MS = 5000;

const lastWarnings = new WeakMap<Pick<Logger, "warn">, Map<string, { at: number; since: number }>>();

/**
 * Logs `message` at warn level at most once every WARNING_INTERVAL_MS for this logger, with the number of times it
 * recurred unlogged since the last one (`recurredSinceLastWarning`): an outage that fails every request is a
 * line every few seconds, not one per request.
 */
export function warnThrottled(
  logger: Pick<Logger, "warn">,
  fields: Record<string, unknown>,
  message: string,
  now = Date.now(),
): void {
  let byMessage = lastWarnings.get(logger);
  if (!byMessage) {
    byMessage = new Map();
    lastWarnings.set(logger, byMessage);
  }
  const last = byMessage.get(message);
  if (last && now - last.at < WARNING_INTERVAL_MS) {
    last.since++;
    return;
  }
  byMessage.set(message, { at: now, since: 0 });
  logger.warn({ ...fields, recurredSinceLastWarning: last?.since ?? 0 }, message);
}
