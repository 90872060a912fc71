import test from "ava";
import { WARNING_INTERVAL_MS, warnThrottled } from "../../src/platform/throttled-warnings.js";

function recordingLogger() {
  const lines: [Record<string, unknown>, string][] = [];
  return { lines, warn: (fields: Record<string, unknown>, message: string) => lines.push([fields, message]) };
}

test("a warning recurring within the interval is counted, not logged; the next one says how often it recurred", (t) => {
  const logger = recordingLogger();
  const start = 1_000_000;
  for (let call = 0; call < 10; call++) warnThrottled(logger as never, { call }, "usage counters failed", start + call);
  warnThrottled(logger as never, {}, "another failure", start + 10);
  t.deepEqual(logger.lines, [
    [{ call: 0, recurredSinceLastWarning: 0 }, "usage counters failed"],
    [{ recurredSinceLastWarning: 0 }, "another failure"],
  ]);
  warnThrottled(logger as never, { call: 10 }, "usage counters failed", start + WARNING_INTERVAL_MS);
  t.deepEqual(logger.lines[2], [{ call: 10, recurredSinceLastWarning: 9 }, "usage counters failed"]);
  const other = recordingLogger();
  warnThrottled(other as never, {}, "usage counters failed", start + 1);
  t.is(other.lines.length, 1, "each logger counts its own");
});
