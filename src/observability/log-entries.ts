import type { SessionRecordKind } from "./session-events.js";

/** Log levels, lowest first (those of log4j, Serilog and pino, and OpenTelemetry's severity ranges). */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal"] as const;
/** A log entry's eventData (the message, text or JSON) at most: a message with a stack trace fits. */
export const MAX_LOG_DATA_BYTES = 8 * 1024;

const levels = new Set<string>(LOG_LEVELS);

/** The stored (lower-case) level of `name`; undefined when it is none. */
export function logLevelOf(name: string): string | undefined {
  const level = name.toLowerCase();
  return levels.has(level) ? level : undefined;
}

/** Log entries: eventName is the level (any case, stored lower case), eventData any text. */
export const logEntries: SessionRecordKind = {
  eventName(name) {
    const level = logLevelOf(name);
    return level ? { name: level } : { refused: `must be one of ${LOG_LEVELS.join(", ")}` };
  },
  maxDataBytes: MAX_LOG_DATA_BYTES,
  refuseData: () => undefined,
};
