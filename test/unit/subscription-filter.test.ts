import { create } from "@bufbuild/protobuf";
import test from "ava";
import { OverageSeverity } from "../../gen/provision/v1/catalog_pb.js";
import { SubscriptionFilterSchema } from "../../gen/provision/v1/webhook_pb.js";
import {
  checkFilter,
  type EventFilter,
  type MatchedEvent,
  matchesFilter,
  matchesSubscription,
} from "../../src/webhooks/subscription-filter.js";

const activated: MatchedEvent = {
  type: "Entitlement.Activated",
  entityKind: "entitlement",
  attributes: {
    id: "6b1f2c0e-0000-4000-8000-000000000001",
    subject: "entitlements/e-1",
    entityid: "e-1",
    entitykind: "entitlement",
  },
  data: {
    entitlementId: "e-1",
    customerId: "c-42",
    orderId: "",
    isTrial: false,
    numberOfSeats: 5,
    graceEndsAt: null,
    replacedSessionIds: ["s-1"],
    entityid: "shadowed by the envelope",
  },
};

const overage: MatchedEvent = {
  type: "MeteredUsage.OverageStatusChanged",
  entityKind: "monitored-asset",
  severity: OverageSeverity.WARNING,
  attributes: { entityid: "a-1" },
  data: { monitoredAssetId: "a-1" },
};

test("no filter, or an empty one, does not narrow", (t) => {
  t.true(matchesFilter(undefined, activated));
  t.true(matchesFilter(null, activated));
  t.true(matchesFilter({}, activated));
  t.true(matchesFilter({ entityKinds: [], severities: [], attributes: {} }, overage));
  t.true(matchesFilter(create(SubscriptionFilterSchema), activated));
});

test("entity kinds: any listed kind matches", (t) => {
  t.true(matchesFilter({ entityKinds: ["entitlement"] }, activated));
  t.true(matchesFilter({ entityKinds: ["monitored-asset", "entitlement"] }, activated));
  t.false(matchesFilter({ entityKinds: ["monitored-asset"] }, activated));
  t.false(matchesFilter({ entityKinds: ["Entitlement"] }, activated));
});

test("severities narrow events that have one, and only those", (t) => {
  t.true(matchesFilter({ severities: [OverageSeverity.WARNING, OverageSeverity.CRITICAL] }, overage));
  t.false(matchesFilter({ severities: [OverageSeverity.OVER_USAGE] }, overage));
  t.true(matchesFilter({ severities: [OverageSeverity.OVER_USAGE] }, activated));
});

test("attributes: the envelope attribute of that name, else the top-level data member, compared as text", (t) => {
  t.true(matchesFilter({ attributes: { subject: "entitlements/e-1" } }, activated));
  t.true(matchesFilter({ attributes: { entityid: "e-1" } }, activated), "the envelope comes first");
  t.false(matchesFilter({ attributes: { entityid: "shadowed by the envelope" } }, activated));
  t.true(matchesFilter({ attributes: { customerId: "c-42" } }, activated));
  t.true(matchesFilter({ attributes: { orderId: "" } }, activated));
  t.true(matchesFilter({ attributes: { isTrial: "false" } }, activated));
  t.true(matchesFilter({ attributes: { numberOfSeats: "5" } }, activated));
  t.false(matchesFilter({ attributes: { numberOfSeats: "05" } }, activated));
  t.false(matchesFilter({ attributes: { customerId: "c-43" } }, activated));
  t.false(matchesFilter({ attributes: { customerId: "C-42" } }, activated));
});

test("an attribute found nowhere, or not a plain value, never matches", (t) => {
  t.false(matchesFilter({ attributes: { region: "" } }, activated));
  t.false(matchesFilter({ attributes: { graceEndsAt: "null" } }, activated));
  t.false(matchesFilter({ attributes: { graceEndsAt: "" } }, activated));
  t.false(matchesFilter({ attributes: { replacedSessionIds: "s-1" } }, activated));
  t.false(matchesFilter({ attributes: { toString: "" } }, activated), "inherited members are not members");
  t.false(matchesFilter({ attributes: { constructor: "[object Object]" } }, activated));
});

test("every criterion must hold, and every attribute", (t) => {
  const filter: EventFilter = {
    entityKinds: ["entitlement"],
    severities: [OverageSeverity.CRITICAL],
    attributes: { customerId: "c-42", entityid: "e-1" },
  };
  t.true(matchesFilter(filter, activated));
  t.false(matchesFilter({ ...filter, attributes: { customerId: "c-42", entityid: "e-2" } }, activated));
  t.false(matchesFilter({ ...filter, entityKinds: ["asset-usage-tracker"] }, activated));
  t.false(matchesFilter({ ...filter, entityKinds: ["monitored-asset"] }, overage), "severity fails");
});

test("a subscription matches when an event type pattern and the filter both do", (t) => {
  t.true(matchesSubscription({ eventTypes: ["Entitlement.*"] }, activated));
  t.true(matchesSubscription({ eventTypes: ["*"], filter: null }, overage));
  t.false(matchesSubscription({ eventTypes: ["Entitlement.Renewed"] }, activated));
  t.false(matchesSubscription({ eventTypes: ["*"], filter: { entityKinds: ["monitored-asset"] } }, activated));
  t.true(matchesSubscription({ eventTypes: ["*"], filter: { attributes: { customerId: "c-42" } } }, activated));
  const challenge = { ...activated, type: "Webhooks.Registration.Challenge", entityKind: "webhook-subscription" };
  t.false(matchesSubscription({ eventTypes: ["*"] }, challenge));
});

test("a filter stored as REST JSON matches like the message", (t) => {
  const stored = JSON.parse('{"entityKinds":["entitlement"],"severities":[],"attributes":{"customerId":"c-42"}}');
  t.true(matchesFilter(stored, activated));
  t.false(matchesFilter(stored, overage));
});

test("checkFilter accepts the three entity kinds, defined severities and bounded attributes", (t) => {
  const filter = create(SubscriptionFilterSchema, {
    entityKinds: ["entitlement", "monitored-asset", "asset-usage-tracker"],
    severities: [OverageSeverity.NORMAL, OverageSeverity.WARNING, OverageSeverity.CRITICAL, OverageSeverity.OVER_USAGE],
    attributes: { customerId: "c-42", subject: "", ["k".repeat(128)]: "v".repeat(1024) },
  });
  t.deepEqual(checkFilter(filter), []);
  t.deepEqual(checkFilter({}), []);
});

test("checkFilter names each bad value", (t) => {
  const violations = checkFilter({
    entityKinds: ["entitlement", "user", "Entitlement"],
    severities: [OverageSeverity.UNSPECIFIED, OverageSeverity.WARNING, 9],
    attributes: { "": "x", ["k".repeat(129)]: "v", fine: "v".repeat(1025) },
  });
  t.deepEqual(
    violations.map((violation) => violation.field),
    [
      "filter.entityKinds[1]",
      "filter.entityKinds[2]",
      "filter.severities[0]",
      "filter.severities[2]",
      'filter.attributes[""]',
      `filter.attributes["${"k".repeat(129)}"]`,
      'filter.attributes["fine"]',
    ],
  );
  t.regex(violations[0].message, /entitlement, monitored-asset, asset-usage-tracker/);
  t.regex(violations[2].message, /1, 2, 3, 4/);
  t.is(checkFilter({ entityKinds: ["x"] }, "update.filter")[0].field, "update.filter.entityKinds[0]");
});
