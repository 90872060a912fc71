import { Writable } from "node:stream";
import { createLogger, type Logger } from "../../src/platform/logger.js";

/** A logger at `level` whose lines are kept in `lines`, one per record, for a test to read. */
export function collectingLogger(level = "info"): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      callback();
    },
  });
  return { logger: createLogger(level, sink), lines };
}
