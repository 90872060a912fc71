import { getOption, hasOption } from "@bufbuild/protobuf";
import test from "ava";
import { event, file_provision_v1_webhook_events } from "../../gen/provision/v1/webhook_events_pb.js";
import {
  CHALLENGE_EVENT_TYPE,
  checkEventTypePatterns,
  distinctEventTypePatterns,
  EVENT_CATALOG,
  findEventType,
  matchesEventType,
} from "../../src/webhooks/event-catalog.js";

/** The spec's event catalog. */
const SPEC_TYPES = [
  "Entitlement.Activated",
  "Entitlement.Expiring",
  "Entitlement.TrialExpiring",
  "Entitlement.Renewed",
  "Entitlement.Cancelled",
  "Entitlement.PlanApplied",
  "MeteredUsage.OverageStatusChanged",
  "CreditBalance.StatusChanged",
  "DataSubjectRequest.Filed",
  "DataSubjectRequest.Approved",
  "DataSubjectRequest.Rejected",
  "DataSubjectRequest.Completed",
  "User.Erased",
  "Webhooks.Registration.Challenge",
];

const messages = file_provision_v1_webhook_events.messages.filter((message) => hasOption(message, event));

test("the catalog holds the spec's event types, ordered by type, each once", (t) => {
  const types = EVENT_CATALOG.map((entry) => entry.type);
  t.deepEqual([...types].sort(), [...SPEC_TYPES].sort());
  t.deepEqual(types, [...types].sort());
  for (const entry of EVENT_CATALOG) {
    t.true(entry.eventVersion >= 1, entry.type);
    t.not(entry.entityKind, "", entry.type);
    t.not(entry.description, "", entry.type);
  }
});

test("declared data messages give their type's entitykind, eventversion, description and data schema", (t) => {
  t.true(messages.length >= 7);
  for (const message of messages) {
    const declaration = getOption(message, event);
    t.deepEqual(findEventType(declaration.type), {
      type: declaration.type,
      entityKind: declaration.entitykind,
      eventVersion: declaration.eventversion,
      description: declaration.description,
      dataSchema: message,
    });
  }
  t.is(findEventType("Entitlement.Activated")?.entityKind, "entitlement");
  t.is(findEventType(CHALLENGE_EVENT_TYPE)?.entityKind, "webhook-subscription");
  t.is(findEventType("User.Erased")?.dataSchema, undefined);
  t.is(findEventType("Entitlement.Unknown"), undefined);
});

test("exact known types, dotted-prefix wildcards and * are accepted", (t) => {
  const accepted = [
    "*",
    "Entitlement.Activated",
    "Entitlement.*",
    "DataSubjectRequest.*",
    "MeteredUsage.*",
    "User.Erased",
    "CreditBalance.StatusChanged",
  ];
  t.deepEqual(checkEventTypePatterns(accepted), []);
  for (const type of SPEC_TYPES.filter((type) => type !== CHALLENGE_EVENT_TYPE)) {
    t.deepEqual(checkEventTypePatterns([type]), [], type);
  }
});

test("unknown types, bad wildcards and the challenge are refused, each naming its index", (t) => {
  const patterns = [
    "Entitlement.Activated",
    "Entitlement.Unknown",
    "entitlement.activated",
    "Entitle.*",
    "*.Activated",
    "Entitlement*",
    "Entitlement.Activated.*",
    "Webhooks.*",
    "Webhooks.Registration.*",
    CHALLENGE_EVENT_TYPE,
    "",
    ".*",
    "**",
    " Entitlement.Activated",
  ];
  const violations = checkEventTypePatterns(patterns);
  t.deepEqual(
    violations.map((violation) => violation.field),
    patterns.slice(1).map((_, index) => `eventTypes[${index + 1}]`),
  );
  const messageOf = (index: number) =>
    violations.find((violation) => violation.field === `eventTypes[${index}]`)?.message;
  t.regex(messageOf(2) ?? "", /case-sensitive: Entitlement\.Activated/);
  t.regex(messageOf(3) ?? "", /must be a dotted prefix/);
  t.regex(messageOf(7) ?? "", /matches no event type/);
  t.regex(messageOf(9) ?? "", /cannot be subscribed to/);
  t.regex(messageOf(10) ?? "", /must not be empty/);
});

test("at least one and at most 100 patterns, counted on the field itself", (t) => {
  t.deepEqual(checkEventTypePatterns([]), [
    { field: "eventTypes", message: "must name at least one event type, prefix wildcard or *" },
  ]);
  t.deepEqual(checkEventTypePatterns(Array(100).fill("*")), []);
  const tooMany = checkEventTypePatterns(Array(101).fill("*"));
  t.is(tooMany.length, 1);
  t.is(tooMany[0].field, "eventTypes");
  t.regex(tooMany[0].message, /101 items; at most 100/);
  t.is(checkEventTypePatterns(["Nope"], "subscription.eventTypes")[0].field, "subscription.eventTypes[0]");
});

test("duplicates are removed, the first order kept", (t) => {
  t.deepEqual(distinctEventTypePatterns(["Entitlement.*", "*", "Entitlement.*", "User.Erased", "*"]), [
    "Entitlement.*",
    "*",
    "User.Erased",
  ]);
});

test("matching: exact, prefix wildcard on whole segments, and *", (t) => {
  t.true(matchesEventType(["Entitlement.Activated"], "Entitlement.Activated"));
  t.false(matchesEventType(["Entitlement.Activated"], "Entitlement.Renewed"));
  t.true(matchesEventType(["Entitlement.*"], "Entitlement.TrialExpiring"));
  t.false(matchesEventType(["Entitlement.*"], "EntitlementX.Activated"));
  t.false(matchesEventType(["Entitlement.*"], "User.Erased"));
  t.true(matchesEventType(["DataSubjectRequest.*"], "DataSubjectRequest.Completed"));
  t.true(matchesEventType(["User.Erased", "*"], "MeteredUsage.OverageStatusChanged"));
  t.false(matchesEventType([], "Entitlement.Activated"));
  t.false(matchesEventType(["entitlement.activated"], "Entitlement.Activated"));
});

test("the challenge matches no pattern, not even *", (t) => {
  t.false(matchesEventType(["*"], CHALLENGE_EVENT_TYPE));
  t.false(matchesEventType(["Webhooks.*"], CHALLENGE_EVENT_TYPE));
  t.false(matchesEventType([CHALLENGE_EVENT_TYPE], CHALLENGE_EVENT_TYPE));
});
