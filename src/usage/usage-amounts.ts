/** Usage amounts as whole micro-units (10^-6 of a unit): integers add up exactly where doubles drift. */
export const MICRO_PER_UNIT = 1_000_000;
/** The largest amount one item, tier bound or credit figure may hold, in units. */
export const MAX_AMOUNT_UNITS = 1_000_000_000;
/** Totals in micro-units stay exact up to here (2^53 - 1, about 9 × 10^9 units). */
export const MAX_EXACT_TOTAL_MICRO = Number.MAX_SAFE_INTEGER;

const DECIMALS = 6;
const EXAMPLE = 'a number such as 12.5 or an object such as {"amount":12.5}';

/**
 * The amount in micro-units, rounded half up at the 6th decimal place of the number as JSON prints it (so
 * 1.0000005 gives 1000001); undefined unless finite, at least 0 and at most MAX_AMOUNT_UNITS.
 * For numbers with at most 6 decimal places this equals Math.round(value * 1e6).
 */
export function toMicro(value: number): number | undefined {
  if (!Number.isFinite(value) || value < 0 || value > MAX_AMOUNT_UNITS + 1) return undefined;
  return withinMaxAmount(roundedMicro(String(value)));
}

/** The largest amount is checked once rounded: 1000000000.0000004 is 10^9 units. */
function withinMaxAmount(micro: number): number | undefined {
  return micro > MAX_AMOUNT_UNITS * MICRO_PER_UNIT ? undefined : micro;
}

/**
 * A bound of a definition (a tier's start or end, a credit amount) in micro-units: negative bounds are 0, bounds
 * beyond exact totals are the largest exact total. Unlike an item's amount, a definition is never refused here.
 */
export function definitionMicro(units: number): number {
  if (!(units > 0)) return 0;
  return Math.min(Math.round(units * MICRO_PER_UNIT), MAX_EXACT_TOTAL_MICRO);
}

/** Micro-units back to units, for display and protobuf doubles only: never add the results. */
export function fromMicro(micro: number): number {
  return micro / MICRO_PER_UNIT;
}

/**
 * The amount of a usage transaction's eventData: JSON text holding a number (`12.5`) or an object with a numeric
 * `amount` (`{"amount":12.5}`; other members are ignored).
 */
export function parseUsageAmount(eventData: string): { micro: number } | { problem: string } {
  const plain = plainAmountMicro(eventData);
  if (plain !== undefined) return { micro: plain };
  if (eventData.trim() === "") return { problem: `is empty: send the amount consumed as ${EXAMPLE}` };
  let data: unknown;
  try {
    data = JSON.parse(eventData);
  } catch {
    return { problem: `is not valid JSON: send the amount consumed as ${EXAMPLE}` };
  }
  const amount = amountIn(data);
  if (typeof amount === "string") return { problem: amount };
  if (amount < 0) return { problem: "holds a negative amount: usage amounts must be 0 or more" };
  // More than 6 decimal places are rounded to the nearest micro-unit, not refused: float sums like 0.1 + 0.2 are common.
  const micro = toMicro(amount);
  if (micro === undefined) return { problem: `holds an amount above the largest allowed, ${MAX_AMOUNT_UNITS}` };
  return { micro };
}

/** A JSON number without sign or exponent, of at most 15 digits: it converts to a double and back unchanged. */
const PLAIN_AMOUNT = /^(?:0|[1-9]\d*)(?:\.\d+)?$/;
const MAX_PLAIN_DIGITS = 15;

/**
 * The micro-units of the everyday amount (`1`, `2.5`) read from its text: the same as toMicro of the number JSON
 * makes of it, without parsing JSON. Undefined for any other text.
 */
function plainAmountMicro(text: string): number | undefined {
  if (text.length > MAX_PLAIN_DIGITS + 1 || !PLAIN_AMOUNT.test(text)) return undefined;
  if (text.length > MAX_PLAIN_DIGITS && !text.includes(".")) return undefined;
  return Number(text) > MAX_AMOUNT_UNITS + 1 ? undefined : withinMaxAmount(roundedMicro(text));
}

/** The number the data holds, or why it holds none. */
function amountIn(data: unknown): number | string {
  if (typeof data === "number") return data;
  if (data !== null && typeof data === "object" && !Array.isArray(data)) {
    const amount = (data as Record<string, unknown>).amount;
    if (typeof amount === "number") return amount;
    return amount === undefined
      ? `is an object without "amount": send ${EXAMPLE}`
      : `holds an "amount" that is ${kindOf(amount)}, not a number: send ${EXAMPLE}`;
  }
  return `is ${kindOf(data)}, not an amount: send ${EXAMPLE}`;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

/** Rounds a non-negative decimal text (`12.5`, `1e-7`, `1.5e-7`) half up to whole micro-units. */
function roundedMicro(text: string): number {
  const match = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(text);
  if (!match) throw new Error(`not a plain decimal: ${text}`);
  const digits = match[1] + (match[2] ?? "");
  const point = match[1].length + Number(match[3] ?? 0) + DECIMALS;
  if (point <= 0) return point === 0 && digits[0] >= "5" ? 1 : 0;
  const whole = Number(digits.slice(0, point).padEnd(point, "0"));
  return (digits[point] ?? "0") >= "5" ? whole + 1 : whole;
}
