import { create } from "@bufbuild/protobuf";
import test from "ava";
import { UsageQuotaSchema, UsageTierSchema } from "../../gen/provision/v1/catalog_pb.js";
import {
  balanceStatusOf,
  blockCapOf,
  quotaRulesOf,
  severityAt,
  severityOfBalance,
  tierAt,
  tierRulesOf,
} from "../../src/usage/usage-tiers.js";

const MICRO = 1_000_000;
const tiers = tierRulesOf(
  [
    { name: "Hard", startUsage: 120, endUsage: 0, quotaUsageLevel: 4, quotaUsagePolicy: 3 },
    { name: "Included", startUsage: 0, endUsage: 100, quotaUsageLevel: 0, quotaUsagePolicy: 0 },
    { name: "Overage", startUsage: 100, endUsage: 120, quotaUsageLevel: 2, quotaUsagePolicy: 2 },
  ].map((tier) => create(UsageTierSchema, tier)),
);

test("tiers are ordered by start; unset level and policy read as Normal and Allow; no end is no bound", (t) => {
  t.deepEqual(
    tiers.map((tier) => [tier.name, tier.startMicro, tier.endMicro, tier.severity, tier.policy]),
    [
      ["Included", 0, 100 * MICRO, 1, 1],
      ["Overage", 100 * MICRO, 120 * MICRO, 2, 2],
      ["Hard", 120 * MICRO, null, 4, 3],
    ],
  );
});

test("a tier covers consumption above its start up to and including its end", (t) => {
  const at = (units: number) => tierAt(tiers, Math.round(units * MICRO))?.name;
  t.is(at(0), "Included");
  t.is(at(100), "Included");
  t.is(at(100.000001), "Overage");
  t.is(at(120), "Overage");
  t.is(at(120.000001), "Hard");
  t.is(at(1e9), "Hard");
  t.is(severityAt(tiers, 110 * MICRO), 2);
  t.is(tierAt([], 5), undefined);
  t.is(severityAt([], 5), 1);
});

test("consumption at or below a first tier starting above 0 is in no tier, and Normal", (t) => {
  const [hard] = tierRulesOf([
    create(UsageTierSchema, { name: "Hard", startUsage: 5, quotaUsageLevel: 4, quotaUsagePolicy: 3 }),
  ]);
  t.is(tierAt([hard], 3 * MICRO), undefined);
  t.is(tierAt([hard], 5 * MICRO), undefined);
  t.is(severityAt([hard], 3 * MICRO), 1);
  t.is(tierAt([hard], 5 * MICRO + 1)?.name, "Hard");
});

test("consumption above the first Block tier's start is refused; without one, nothing is", (t) => {
  t.is(blockCapOf(tiers), 120 * MICRO);
  t.is(blockCapOf(tiers.filter((tier) => tier.policy !== 3)), undefined);
});

test("tier bounds beyond exact totals or below zero are clamped, not dropped", (t) => {
  const [huge] = tierRulesOf([create(UsageTierSchema, { name: "Far", startUsage: 5e10, quotaUsagePolicy: 3 })]);
  t.is(huge.startMicro, Number.MAX_SAFE_INTEGER);
  const [negative] = tierRulesOf([create(UsageTierSchema, { name: "Neg", startUsage: -5 })]);
  t.is(negative.startMicro, 0);
});

test("a balance's status: quotas are percentages of the credits used; all used is Depleted; unlimited is Normal", (t) => {
  const quotas = quotaRulesOf(
    [
      { name: "Empty", endUsage: 100, quotaUsageLevel: 3 },
      { name: "Low", endUsage: 80, quotaUsageLevel: 2 },
    ].map((quota) => create(UsageQuotaSchema, quota)),
  );
  const total = 50 * MICRO;
  t.deepEqual(balanceStatusOf(quotas, 39.999999 * MICRO, total), { status: 1, quota: "" });
  t.deepEqual(balanceStatusOf(quotas, 40 * MICRO, total), { status: 2, quota: "Low" });
  t.deepEqual(balanceStatusOf(quotas, total, total), { status: 3, quota: "Empty" });
  t.deepEqual(balanceStatusOf([], total, total), { status: 3, quota: "Depleted" });
  t.deepEqual(balanceStatusOf([], 10 * MICRO, total), { status: 1, quota: "" });
  t.deepEqual(balanceStatusOf(quotas, 10 ** 15, null), { status: 1, quota: "" });
  t.deepEqual([1, 2, 3].map(severityOfBalance), [1, 2, 4]);
});
