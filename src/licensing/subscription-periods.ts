import type { SubscriptionPolicy } from "../../gen/provision/v1/entitlement_pb.js";
import { invalidField } from "../platform/errors.js";
import { dateUpToLatest } from "../platform/timestamps.js";
import { dateOf, earliest, hasEnded } from "./policy-time.js";

/** A renewal period: calendar months are added first (clamped to the month's last day), then fixed milliseconds. */
export interface RenewPeriod {
  months: number;
  ms: number;
}

/** A subscription as of an instant, the renewals that have passed consumed. */
export interface EffectiveSubscription {
  /** isSubscriptionActive, and the subscription has not ended. */
  active: boolean;
  /** The next renewal (the end itself when no period is left); null once ended or without a schedule. */
  nextRenewalAt: Date | null;
  /** Renewals left; -1 = renews until cancelled. */
  periodsLeft: number;
  /** When the periods run out or notValidAfterTimestamp, the earlier; null = no end. */
  endsAt: Date | null;
}

const RENEW_PERIOD_FIELD = "activationPolicy.subscriptionPolicy.renewPeriod";
const MAX_INPUT_LENGTH = 64;
const DAY_MS = 86_400_000;
const AVERAGE_MONTH_MS = 30.436875 * DAY_MS;
const MAX_PERIOD_MS = 100 * 12 * AVERAGE_MONTH_MS;
const UNITS: Record<string, RenewPeriod> = {
  day: { months: 0, ms: DAY_MS },
  week: { months: 0, ms: 7 * DAY_MS },
  month: { months: 1, ms: 0 },
  year: { months: 12, ms: 0 },
};
const ISO_PERIOD = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/i;
const ACCEPTED_FORMS =
  'expected "day", "week", "month" or "year", or an ISO 8601 duration of whole units such as "P1M", "P2W" or "P1Y2M10DT2H"';

/**
 * Parses a subscription's renewPeriod: a unit word (`day`, `week`, `month`, `year`, case-insensitive) or an
 * ISO 8601 duration `P[nY][nM][nW][nD][T[nH][nM][nS]]` of whole units, longer than zero and at most 100 years.
 * Throws invalidField naming `field`.
 */
export function parseRenewPeriod(text: string, field = RENEW_PERIOD_FIELD): RenewPeriod {
  const input = text.trim();
  if (input === "") throw invalidField(field, `is empty; ${ACCEPTED_FORMS}`);
  if (input.length > MAX_INPUT_LENGTH) throw invalidField(field, `is longer than ${MAX_INPUT_LENGTH} characters`);
  const unit = UNITS[input.toLowerCase()];
  if (unit) return { ...unit };

  const match = ISO_PERIOD.exec(input);
  if (!match || input.length === 1)
    throw invalidField(field, `${JSON.stringify(input)} is not valid; ${ACCEPTED_FORMS}`);
  const [years, months, weeks, days, hours, minutes, seconds] = match.slice(1).map((digits) => Number(digits ?? "0"));
  const period = {
    months: years * 12 + months,
    ms: (weeks * 7 + days) * DAY_MS + ((hours * 60 + minutes) * 60 + seconds) * 1000,
  };
  const length = approximateMs(period);
  if (length === 0) throw invalidField(field, `${JSON.stringify(input)} is zero; a renewal period must be longer`);
  if (!(length <= MAX_PERIOD_MS)) throw invalidField(field, `${JSON.stringify(input)} is longer than 100 years`);
  return period;
}

/**
 * The subscription as of `now`. Renewals fall on nextRenewalTimeStamp and every renewInterval (0 = 1) ×
 * renewPeriod after it, counted from nextRenewalTimeStamp itself so month ends do not drift (Jan 31, Feb 28,
 * Mar 31). Each renewal that has passed consumes one of subscriptionPeriodsLeft (any negative = never runs
 * out); the subscription ends at the renewal reached with none left. Without renewPeriod only
 * nextRenewalTimeStamp itself is a renewal. A stored renewPeriod that does not parse throws invalidField.
 */
export function effectiveSubscription(policy: SubscriptionPolicy, now: Date): EffectiveSubscription {
  const step = renewalStep(policy);
  const first = dateOf(policy.nextRenewalTimeStamp);
  const left = policy.subscriptionPeriodsLeft < 0 ? -1 : policy.subscriptionPeriodsLeft;
  const periodsEnd = first !== null && left >= 0 ? renewalAt(first, step, left) : null;
  const endsAt = earliest(periodsEnd, dateOf(policy.notValidAfterTimestamp));
  const ended = hasEnded(endsAt, now);
  // Once ended, count the renewals that fell before the end.
  const asOf = ended && endsAt !== null ? new Date(endsAt.getTime() - 1) : now;
  const passed = first === null ? 0 : renewalsPassed(first, step, asOf);
  const consumed = left < 0 ? passed : Math.min(passed, left);
  return {
    active: policy.isSubscriptionActive && !ended,
    nextRenewalAt: ended || first === null ? null : renewalAt(first, step, consumed),
    periodsLeft: left < 0 ? -1 : left - consumed,
    endsAt,
  };
}

/** Adds `times` periods to `date`. */
/**
 * The renewal instants that have passed by `now` and fall after `since`, oldest first, at most `limit` (the
 * earliest ones: a caller announcing them goes on from the last); each with the periods left after it (-1 =
 * unlimited). Only renewals, not the end.
 */
export function renewalsBetween(
  policy: SubscriptionPolicy,
  since: Date,
  now: Date,
  limit: number,
): { at: Date; periodsLeft: number }[] {
  const first = dateOf(policy.nextRenewalTimeStamp);
  if (first === null) return [];
  const step = renewalStep(policy);
  const effective = effectiveSubscription(policy, now);
  const left = policy.subscriptionPeriodsLeft < 0 ? -1 : policy.subscriptionPeriodsLeft;
  const consumed = left < 0 ? renewalsPassed(first, step, now) : left - effective.periodsLeft;
  const renewals: { at: Date; periodsLeft: number }[] = [];
  for (let index = renewalsPassed(first, step, since); index < consumed && renewals.length < limit; index++) {
    const at = renewalAt(first, step, index);
    if (at === null || (effective.endsAt && at >= effective.endsAt)) break;
    renewals.push({ at, periodsLeft: left < 0 ? -1 : left - index - 1 });
  }
  return renewals;
}

export function addRenewPeriods(date: Date, period: RenewPeriod, times: number): Date {
  return dateUpToLatest(addMonths(date, period.months * times).getTime() + period.ms * times);
}

function renewalStep(policy: SubscriptionPolicy): RenewPeriod | null {
  if (policy.renewPeriod.trim() === "") return null;
  const period = parseRenewPeriod(policy.renewPeriod);
  const interval = policy.renewInterval > 0 ? policy.renewInterval : 1;
  return { months: period.months * interval, ms: period.ms * interval };
}

/** The index-th renewal (0 = nextRenewalTimeStamp); null when there is no step to reach it. */
function renewalAt(first: Date, step: RenewPeriod | null, index: number): Date | null {
  if (index === 0) return first;
  return step === null ? null : addRenewPeriods(first, step, index);
}

/** How many renewals fall at or before `instant`. */
function renewalsPassed(first: Date, step: RenewPeriod | null, instant: Date): number {
  const t = instant.getTime();
  if (t < first.getTime()) return 0;
  if (step === null) return 1;
  // Estimate the last index at or before t, then correct it: month lengths vary by a few days only.
  let last = Math.floor((t - first.getTime()) / approximateMs(step));
  while (addRenewPeriods(first, step, last + 1).getTime() <= t) last++;
  while (last > 0 && addRenewPeriods(first, step, last).getTime() > t) last--;
  return last + 1;
}

function approximateMs(period: RenewPeriod): number {
  return period.months * AVERAGE_MONTH_MS + period.ms;
}

/** Calendar months in UTC; the day of month is clamped to the target month's last day. */
function addMonths(date: Date, months: number): Date {
  if (months === 0) return date;
  const result = new Date(date.getTime());
  const day = result.getUTCDate();
  result.setUTCDate(1);
  result.setUTCMonth(result.getUTCMonth() + months);
  const lastDay = new Date(Date.UTC(result.getUTCFullYear(), result.getUTCMonth() + 1, 0)).getUTCDate();
  result.setUTCDate(Math.min(day, lastDay));
  return result;
}
