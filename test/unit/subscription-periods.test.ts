import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test, { type ExecutionContext } from "ava";
import { type SubscriptionPolicy, SubscriptionPolicySchema } from "../../gen/provision/v1/entitlement_pb.js";
import {
  addRenewPeriods,
  effectiveSubscription,
  parseRenewPeriod,
  type RenewPeriod,
} from "../../src/licensing/subscription-periods.js";
import { DomainError } from "../../src/platform/errors.js";

const DAY = 86_400_000;
const HOUR = 3_600_000;
const FIELD = "activationPolicy.subscriptionPolicy.renewPeriod";

const at = (iso: string) => new Date(iso);
const shift = (date: Date, ms: number) => new Date(date.getTime() + ms);

interface SubscriptionInit {
  renewPeriod?: string;
  renewInterval?: number;
  isSubscriptionActive?: boolean;
  subscriptionPeriodsLeft?: number;
  next?: string;
  notValidAfter?: string;
}

function subscription({ next, notValidAfter, ...rest }: SubscriptionInit): SubscriptionPolicy {
  return create(SubscriptionPolicySchema, {
    isSubscriptionActive: true,
    ...rest,
    nextRenewalTimeStamp: next ? timestampFromDate(at(next)) : undefined,
    notValidAfterTimestamp: notValidAfter ? timestampFromDate(at(notValidAfter)) : undefined,
  });
}

function rejects(t: ExecutionContext, input: string, pattern: RegExp, field = FIELD): void {
  const error = t.throws(() => parseRenewPeriod(input, field), { instanceOf: DomainError });
  if (!error) return;
  t.is(error.kind, "invalid-argument");
  t.deepEqual(
    error.errors.map((e) => e.field),
    [field],
  );
  t.regex(error.message, pattern);
}

test("parseRenewPeriod: unit words, case-insensitive, surrounding space ignored", (t) => {
  t.deepEqual(parseRenewPeriod("day"), { months: 0, ms: DAY });
  t.deepEqual(parseRenewPeriod("Week"), { months: 0, ms: 7 * DAY });
  t.deepEqual(parseRenewPeriod(" MONTH "), { months: 1, ms: 0 });
  t.deepEqual(parseRenewPeriod("year"), { months: 12, ms: 0 });
});

test("parseRenewPeriod: ISO 8601 durations", (t) => {
  t.deepEqual(parseRenewPeriod("P1M"), { months: 1, ms: 0 });
  t.deepEqual(parseRenewPeriod("p1m"), { months: 1, ms: 0 });
  t.deepEqual(parseRenewPeriod("P2W"), { months: 0, ms: 14 * DAY });
  t.deepEqual(parseRenewPeriod("P1Y"), { months: 12, ms: 0 });
  t.deepEqual(parseRenewPeriod("P1Y2M10DT2H"), { months: 14, ms: 10 * DAY + 2 * HOUR });
  t.deepEqual(parseRenewPeriod("PT1H30M15S"), { months: 0, ms: HOUR + 30 * 60_000 + 15_000 });
  t.deepEqual(parseRenewPeriod("PT1M"), { months: 0, ms: 60_000 }, "M after T is minutes");
  t.deepEqual(parseRenewPeriod("P1W2D"), { months: 0, ms: 9 * DAY });
  t.deepEqual(parseRenewPeriod("P100Y"), { months: 1200, ms: 0 }, "100 years is the longest");
});

test("parseRenewPeriod: rejects bad input as invalidField", (t) => {
  rejects(t, "", /is empty/);
  rejects(t, "   ", /is empty/);
  rejects(t, "fortnight", /"fortnight" is not valid/);
  rejects(t, "days", /not valid/);
  rejects(t, "1M", /not valid/);
  rejects(t, "P", /not valid/);
  rejects(t, "PT", /not valid/);
  rejects(t, "P1MT", /not valid/);
  rejects(t, "P1.5M", /not valid/);
  rejects(t, "P-1M", /not valid/);
  rejects(t, "-P1M", /not valid/);
  rejects(t, "P1D1M", /not valid/, FIELD);
  rejects(t, "P0D", /is zero/);
  rejects(t, "PT0S", /is zero/);
  rejects(t, "P0Y0M", /is zero/);
  rejects(t, "P100Y1D", /longer than 100 years/);
  rejects(t, `P${"9".repeat(40)}Y`, /longer than 100 years/);
  rejects(t, `P${"1".repeat(70)}D`, /longer than 64 characters/);
});

test("parseRenewPeriod: names the field given", (t) => {
  rejects(t, "bad", /^renewPeriod: /, "renewPeriod");
});

test("addRenewPeriods: month arithmetic clamps to the month's last day", (t) => {
  const month: RenewPeriod = { months: 1, ms: 0 };
  t.deepEqual(addRenewPeriods(at("2027-01-31T10:00:00Z"), month, 1), at("2027-02-28T10:00:00Z"));
  t.deepEqual(addRenewPeriods(at("2028-01-31T10:00:00Z"), month, 1), at("2028-02-29T10:00:00Z"), "leap year");
  t.deepEqual(addRenewPeriods(at("2027-03-31T00:00:00Z"), month, 1), at("2027-04-30T00:00:00Z"));
  t.deepEqual(addRenewPeriods(at("2027-01-31T00:00:00Z"), month, 2), at("2027-03-31T00:00:00Z"), "from the anchor");
  t.deepEqual(addRenewPeriods(at("2027-12-15T00:00:00Z"), month, 1), at("2028-01-15T00:00:00Z"), "year rolls over");
  t.deepEqual(addRenewPeriods(at("2028-02-29T00:00:00Z"), { months: 12, ms: 0 }, 1), at("2029-02-28T00:00:00Z"));
  t.deepEqual(addRenewPeriods(at("2028-02-29T00:00:00Z"), { months: 12, ms: 0 }, 4), at("2032-02-29T00:00:00Z"));
  t.deepEqual(
    addRenewPeriods(at("2027-01-31T00:00:00Z"), parseRenewPeriod("P1M1D"), 1),
    at("2027-03-01T00:00:00Z"),
    "months first, then days",
  );
  t.deepEqual(addRenewPeriods(at("2027-01-01T00:00:00Z"), { months: 0, ms: DAY }, 0), at("2027-01-01T00:00:00Z"));
});

test("effectiveSubscription: without nextRenewalTimeStamp nothing is consumed", (t) => {
  const now = at("2026-03-01T12:00:00Z");
  t.deepEqual(effectiveSubscription(subscription({ renewPeriod: "month", subscriptionPeriodsLeft: 3 }), now), {
    active: true,
    nextRenewalAt: null,
    periodsLeft: 3,
    endsAt: null,
  });
  const inactive = subscription({ renewPeriod: "month", isSubscriptionActive: false, subscriptionPeriodsLeft: -1 });
  t.false(effectiveSubscription(inactive, now).active);
});

test("effectiveSubscription: a renewal is consumed exactly at its instant", (t) => {
  const policy = subscription({ renewPeriod: "month", subscriptionPeriodsLeft: 2, next: "2026-03-10T00:00:00Z" });
  const first = at("2026-03-10T00:00:00Z");
  const second = at("2026-04-10T00:00:00Z");
  const end = at("2026-05-10T00:00:00Z");
  t.deepEqual(effectiveSubscription(policy, shift(first, -1)), {
    active: true,
    nextRenewalAt: first,
    periodsLeft: 2,
    endsAt: end,
  });
  t.deepEqual(effectiveSubscription(policy, first), {
    active: true,
    nextRenewalAt: second,
    periodsLeft: 1,
    endsAt: end,
  });
  t.deepEqual(effectiveSubscription(policy, shift(second, -1)).periodsLeft, 1);
  t.deepEqual(effectiveSubscription(policy, second), { active: true, nextRenewalAt: end, periodsLeft: 0, endsAt: end });
  t.deepEqual(effectiveSubscription(policy, shift(end, -1)), {
    active: true,
    nextRenewalAt: end,
    periodsLeft: 0,
    endsAt: end,
  });
  t.deepEqual(effectiveSubscription(policy, end), { active: false, nextRenewalAt: null, periodsLeft: 0, endsAt: end });
  t.deepEqual(effectiveSubscription(policy, at("2030-01-01T00:00:00Z")).periodsLeft, 0);
});

test("effectiveSubscription: no periods left ends at nextRenewalTimeStamp", (t) => {
  const policy = subscription({ renewPeriod: "year", subscriptionPeriodsLeft: 0, next: "2026-06-01T00:00:00Z" });
  const end = at("2026-06-01T00:00:00Z");
  t.true(effectiveSubscription(policy, shift(end, -1)).active);
  t.deepEqual(effectiveSubscription(policy, shift(end, -1)).nextRenewalAt, end);
  t.deepEqual(effectiveSubscription(policy, end), { active: false, nextRenewalAt: null, periodsLeft: 0, endsAt: end });
});

test("effectiveSubscription: -1 (or any negative) never runs out", (t) => {
  for (const left of [-1, -7]) {
    const policy = subscription({ renewPeriod: "week", subscriptionPeriodsLeft: left, next: "2026-01-05T00:00:00Z" });
    const state = effectiveSubscription(policy, at("2026-03-01T12:00:00Z"));
    // Mondays: Jan 5 + 8 weeks = Mar 2.
    t.deepEqual(state, { active: true, nextRenewalAt: at("2026-03-02T00:00:00Z"), periodsLeft: -1, endsAt: null });
  }
});

test("effectiveSubscription: monthly renewals from the 31st do not drift", (t) => {
  const policy = subscription({ renewPeriod: "month", subscriptionPeriodsLeft: -1, next: "2027-01-31T08:00:00Z" });
  t.deepEqual(effectiveSubscription(policy, at("2027-02-01T00:00:00Z")).nextRenewalAt, at("2027-02-28T08:00:00Z"));
  t.deepEqual(effectiveSubscription(policy, at("2027-02-28T08:00:00Z")).nextRenewalAt, at("2027-03-31T08:00:00Z"));
  t.deepEqual(effectiveSubscription(policy, at("2027-03-31T08:00:00Z")).nextRenewalAt, at("2027-04-30T08:00:00Z"));
  t.deepEqual(effectiveSubscription(policy, at("2027-04-30T07:59:59.999Z")).nextRenewalAt, at("2027-04-30T08:00:00Z"));
  t.deepEqual(effectiveSubscription(policy, at("2028-02-01T00:00:00Z")).nextRenewalAt, at("2028-02-29T08:00:00Z"));
});

test("effectiveSubscription: renewInterval multiplies the period; 0 means 1", (t) => {
  const quarterly = subscription({
    renewPeriod: "MONTH",
    renewInterval: 3,
    subscriptionPeriodsLeft: 1,
    next: "2026-01-31T00:00:00Z",
  });
  t.deepEqual(effectiveSubscription(quarterly, at("2026-02-01T00:00:00Z")), {
    active: true,
    nextRenewalAt: at("2026-04-30T00:00:00Z"),
    periodsLeft: 0,
    endsAt: at("2026-04-30T00:00:00Z"),
  });
  const zero = subscription({
    renewPeriod: "day",
    renewInterval: 0,
    subscriptionPeriodsLeft: -1,
    next: "2026-01-01T00:00:00Z",
  });
  t.deepEqual(effectiveSubscription(zero, at("2026-01-03T00:00:00Z")).nextRenewalAt, at("2026-01-04T00:00:00Z"));
});

test("effectiveSubscription: ISO duration periods", (t) => {
  const policy = subscription({ renewPeriod: "P1Y2M10DT2H", subscriptionPeriodsLeft: 5, next: "2026-01-01T00:00:00Z" });
  const state = effectiveSubscription(policy, at("2027-03-11T01:59:59Z"));
  t.deepEqual(state.nextRenewalAt, at("2027-03-11T02:00:00Z"));
  t.is(state.periodsLeft, 4);
  t.is(effectiveSubscription(policy, at("2027-03-11T02:00:00Z")).periodsLeft, 3);
  const fortnightly = subscription({ renewPeriod: "P2W", subscriptionPeriodsLeft: -1, next: "2026-01-01T00:00:00Z" });
  t.deepEqual(effectiveSubscription(fortnightly, at("2026-01-15T00:00:00Z")).nextRenewalAt, at("2026-01-29T00:00:00Z"));
});

test("effectiveSubscription: notValidAfterTimestamp ends it early and stops consuming periods", (t) => {
  const policy = subscription({
    renewPeriod: "month",
    subscriptionPeriodsLeft: 10,
    next: "2026-01-01T00:00:00Z",
    notValidAfter: "2026-03-01T00:00:00Z",
  });
  const end = at("2026-03-01T00:00:00Z");
  const before = effectiveSubscription(policy, shift(end, -1));
  t.deepEqual(before, { active: true, nextRenewalAt: end, periodsLeft: 8, endsAt: end });
  // The renewal that would fall at the end instant is not consumed.
  t.deepEqual(effectiveSubscription(policy, at("2027-01-01T00:00:00Z")), {
    active: false,
    nextRenewalAt: null,
    periodsLeft: 8,
    endsAt: end,
  });
  const noSchedule = subscription({ renewPeriod: "month", notValidAfter: "2026-03-01T00:00:00Z" });
  t.true(effectiveSubscription(noSchedule, shift(end, -1)).active);
  t.false(effectiveSubscription(noSchedule, end).active);
});

test("effectiveSubscription: the periods' end wins when earlier than notValidAfterTimestamp", (t) => {
  const policy = subscription({
    renewPeriod: "month",
    subscriptionPeriodsLeft: 1,
    next: "2026-01-01T00:00:00Z",
    notValidAfter: "2027-01-01T00:00:00Z",
  });
  t.deepEqual(effectiveSubscription(policy, at("2026-01-15T00:00:00Z")).endsAt, at("2026-02-01T00:00:00Z"));
});

test("effectiveSubscription: inactive flag makes it inactive but the schedule still counts", (t) => {
  const policy = subscription({
    renewPeriod: "day",
    isSubscriptionActive: false,
    subscriptionPeriodsLeft: 3,
    next: "2026-01-01T00:00:00Z",
  });
  t.deepEqual(effectiveSubscription(policy, at("2026-01-02T12:00:00Z")), {
    active: false,
    nextRenewalAt: at("2026-01-03T00:00:00Z"),
    periodsLeft: 1,
    endsAt: at("2026-01-04T00:00:00Z"),
  });
});

test("effectiveSubscription: without renewPeriod only nextRenewalTimeStamp is a renewal", (t) => {
  const ending = subscription({ subscriptionPeriodsLeft: 0, next: "2026-02-01T00:00:00Z" });
  t.deepEqual(effectiveSubscription(ending, at("2026-02-01T00:00:00Z")).endsAt, at("2026-02-01T00:00:00Z"));
  t.false(effectiveSubscription(ending, at("2026-02-01T00:00:00Z")).active);
  const renewing = subscription({ subscriptionPeriodsLeft: 3, next: "2026-02-01T00:00:00Z" });
  t.deepEqual(effectiveSubscription(renewing, at("2026-01-01T00:00:00Z")), {
    active: true,
    nextRenewalAt: at("2026-02-01T00:00:00Z"),
    periodsLeft: 3,
    endsAt: null,
  });
  t.deepEqual(effectiveSubscription(renewing, at("2026-02-01T00:00:00Z")), {
    active: true,
    nextRenewalAt: null,
    periodsLeft: 2,
    endsAt: null,
  });
});

test("effectiveSubscription: many passed periods are counted exactly", (t) => {
  const start = at("2000-01-31T00:00:00Z");
  const now = at("2026-03-01T12:00:00Z");
  for (const renewPeriod of ["month", "day", "PT1H", "P1M3D", "year"]) {
    const policy = subscription({ renewPeriod, subscriptionPeriodsLeft: -1, next: start.toISOString() });
    const period = parseRenewPeriod(renewPeriod);
    let expected = 0;
    while (addRenewPeriods(start, period, expected + 1).getTime() <= now.getTime()) expected++;
    t.deepEqual(
      effectiveSubscription(policy, now).nextRenewalAt,
      addRenewPeriods(start, period, expected + 1),
      renewPeriod,
    );
  }
});

test("effectiveSubscription: a stored renewPeriod that does not parse throws invalidField", (t) => {
  const policy = subscription({ renewPeriod: "fortnight", next: "2026-01-01T00:00:00Z" });
  const error = t.throws(() => effectiveSubscription(policy, at("2026-03-01T00:00:00Z")), { instanceOf: DomainError });
  t.is(error?.errors[0]?.field, FIELD);
});
