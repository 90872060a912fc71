import type { SessionRecordKind } from "./session-events.js";

/** A metric sample's eventData at most: a value, a unit and a few tags. */
export const MAX_METRIC_DATA_BYTES = 1024;
/** OpenTelemetry's instrument-name syntax (a letter, then letters, digits, `_`, `.`, `-`, `/`), 128 at most. */
const METRIC_NAME = /^[A-Za-z][A-Za-z0-9_.\-/]{0,127}$/;
/** OpenTelemetry's limit on a unit. */
const MAX_UNIT_LENGTH = 63;
const SAMPLE_MEMBERS = new Set(["value", "unit", "tags"]);

export function isMetricName(name: string): boolean {
  return METRIC_NAME.test(name);
}

/**
 * Metric samples: eventName is the metric's name; eventData is JSON, a finite number or an object with a finite
 * `value`, an optional `unit` (a string) and optional `tags` (an object of strings, numbers and booleans).
 */
export const metricSamples: SessionRecordKind = {
  eventName(name) {
    if (isMetricName(name)) return { name };
    return {
      refused: "must be a metric name: 1 to 128 characters, a letter first, then letters, digits, '_', '.', '-' or '/'",
    };
  },
  maxDataBytes: MAX_METRIC_DATA_BYTES,
  refuseData(data) {
    let sample: unknown;
    try {
      sample = JSON.parse(data);
    } catch {
      return 'must be JSON: a number or {"value": number, "unit"?: string, "tags"?: {…}}';
    }
    return refuseSample(sample);
  },
};

function refuseSample(sample: unknown): string | undefined {
  if (isFiniteNumber(sample)) return undefined;
  if (!isObject(sample)) return 'must be a number or an object {"value": number, "unit"?: string, "tags"?: {…}}';
  const unknown = Object.keys(sample).find((key) => !SAMPLE_MEMBERS.has(key));
  if (unknown !== undefined) return `has an unknown member ${JSON.stringify(unknown)}; allowed: value, unit, tags`;
  if (!isFiniteNumber(sample.value)) return "value must be a finite number";
  if (sample.unit !== undefined && (typeof sample.unit !== "string" || sample.unit.length > MAX_UNIT_LENGTH)) {
    return `unit must be a string of at most ${MAX_UNIT_LENGTH} characters`;
  }
  if (sample.tags !== undefined && !(isObject(sample.tags) && Object.values(sample.tags).every(isTagValue))) {
    return "tags must be an object of strings, numbers and booleans";
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

function isTagValue(value: unknown): boolean {
  return typeof value === "string" || typeof value === "boolean" || isFiniteNumber(value);
}
