// Durations as operators write them in configuration: a whole number and a unit, no sign, no blanks inside.
// Error messages are worded to follow the name of what was parsed, as ConfigError puts them.

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

const DURATION = /^([0-9]+)(ms|s|m|h|d)$/;

const FORMAT = "a whole number and ms, s, m, h or d: 200ms, 5s, 5m, 2h, 3d";

/** Milliseconds of a duration such as `200ms`, `5s`, `5m`, `2h` or `3d`; throws an Error naming the problem. */
export function parseDuration(text: string): number {
  const parsed = durationOrProblem(text);
  if (typeof parsed === "string") throw new Error(parsed);
  return parsed;
}

/** Milliseconds of each duration in a comma-separated list (`0s,200ms,1s`; blanks around entries allowed). */
export function parseDurationList(text: string): number[] {
  if (text.trim() === "") throw new Error(`must be a comma-separated list of durations (${FORMAT}), got nothing`);
  return text.split(",").map((entry, index) => {
    const trimmed = entry.trim();
    if (trimmed === "") throw new Error(`has an empty entry (number ${index + 1}) in ${JSON.stringify(text)}`);
    const parsed = durationOrProblem(trimmed);
    if (typeof parsed === "string") throw new Error(`entry ${index + 1} ${parsed}`);
    return parsed;
  });
}

/** Formats milliseconds in the largest unit that divides them (`300000` → `5m`), the inverse of parseDuration. */
export function formatDuration(ms: number): string {
  const unit = ["d", "h", "m", "s"].find((name) => ms !== 0 && ms % UNIT_MS[name] === 0) ?? "ms";
  return `${ms / UNIT_MS[unit]}${unit}`;
}

function durationOrProblem(text: string): number | string {
  const match = DURATION.exec(text);
  if (!match) return `must be a duration (${FORMAT}), got ${JSON.stringify(text)}`;
  const ms = Number(match[1]) * UNIT_MS[match[2]];
  if (!Number.isSafeInteger(ms)) return `must be a duration that fits in a number of milliseconds, got ${text}`;
  return ms;
}
