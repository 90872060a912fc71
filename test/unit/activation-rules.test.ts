import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import test, { type ExecutionContext } from "ava";
import { SessionStatus } from "../../gen/provision/v1/activation_pb.js";
import {
  type ActivationPolicy,
  ActivationPolicySchema,
  RequiredAuthenticationLevel,
} from "../../gen/provision/v1/entitlement_pb.js";
import {
  type ActivationAsk,
  authenticationLevel,
  type CodeFacts,
  checkActivation,
  DEFAULT_LEASE_MS,
  type EntitlementFacts,
  enabledFeatures,
  type FeatureFacts,
  firstActivationOf,
  leaseFor,
  type SessionFacts,
  sessionStatus,
} from "../../src/licensing/activation-rules.js";
import { DomainError, type ProblemKind } from "../../src/platform/errors.js";

const NOW = new Date("2026-03-01T12:00:00.000Z");
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const USER = "0e8f4b1c-1111-4a4a-8a8a-000000000001";
const GROUP = "0e8f4b1c-2222-4a4a-8a8a-000000000002";

const shift = (ms: number, from = NOW) => new Date(from.getTime() + ms);
const ts = (ms: number, from = NOW) => timestampFromDate(shift(ms, from));
const span = (ms: number) => durationFromMs(ms);

function policy(init: MessageInitShape<typeof ActivationPolicySchema>): ActivationPolicy {
  return create(ActivationPolicySchema, init);
}

function entitlement(overrides: Partial<EntitlementFacts> = {}): EntitlementFacts {
  return {
    id: "6a1b2c3d-0000-4000-8000-000000000001",
    isRevoked: false,
    allowLicenseActivation: true,
    isTemplate: false,
    isEntitlementTrial: false,
    expirationDateTime: null,
    createdAt: shift(-10 * DAY),
    policy: undefined,
    productIds: ["p1"],
    products: [{ id: "p1", productCode: "ACME-CAD", productVersion: "2.1" }],
    ...overrides,
  };
}

function code(overrides: Partial<CodeFacts> = {}): CodeFacts {
  return {
    requiredAuthenticationLevel: 0,
    email: "",
    userId: "",
    organizationGroupId: "",
    fingerprint: "",
    preAuthorizedDevices: [],
    isDeleted: false,
    expirationTimeStamp: null,
    requiresUserConsent: false,
    userConsent: false,
    isTrialActivation: false,
    activationCodeUseCount: 0,
    maxActivationCodeUseCount: 0,
    firstActivationAt: null,
    ...overrides,
  };
}

function ask(overrides: Partial<ActivationAsk> = {}): ActivationAsk {
  return {
    fingerprint: "device-a",
    email: "",
    targetSoftwareVersion: "",
    requestedLeaseMs: null,
    acceptLicenseTerms: false,
    user: null,
    ...overrides,
  };
}

function session(overrides: Partial<SessionFacts> = {}): SessionFacts {
  return {
    leaseExpiresAt: shift(HOUR),
    graceEndsAt: shift(2 * HOUR),
    released: false,
    ended: false,
    ...overrides,
  };
}

interface Case {
  entitlement?: Partial<EntitlementFacts>;
  code?: Partial<CodeFacts>;
  ask?: Partial<ActivationAsk>;
  now?: Date;
}

function check(c: Case): void {
  checkActivation(entitlement(c.entitlement), code(c.code), ask(c.ask), c.now ?? NOW);
}

function refused(t: ExecutionContext, c: Case, slug: string, kind: ProblemKind = "permission-denied"): void {
  const error = t.throws(() => check(c), { instanceOf: DomainError }, `expected ${slug}`);
  if (!error) return;
  t.is(error.slug, slug);
  t.is(error.kind, kind);
}

function allowed(t: ExecutionContext, c: Case, message?: string): void {
  t.notThrows(() => check(c), message);
}

test("checkActivation: a plain code on a plain entitlement activates", (t) => {
  allowed(t, {});
});

test("checkActivation: deleted code answers 404 code-deleted", (t) => {
  refused(t, { code: { isDeleted: true } }, "code-deleted", "not-found");
});

test("checkActivation: code expiry is exclusive: refused exactly at expirationTimeStamp", (t) => {
  allowed(t, { code: { expirationTimeStamp: shift(1) } });
  refused(t, { code: { expirationTimeStamp: NOW } }, "code-expired", "not-found");
  refused(t, { code: { expirationTimeStamp: shift(-1) } }, "code-expired", "not-found");
});

test("checkActivation: templates, revoked and disabled entitlements are refused", (t) => {
  refused(t, { entitlement: { isTemplate: true } }, "template-not-activatable");
  refused(t, { entitlement: { isRevoked: true } }, "entitlement-revoked");
  refused(t, { entitlement: { allowLicenseActivation: false } }, "activation-disabled");
});

test("checkActivation: entitlement expiry is exclusive", (t) => {
  allowed(t, { entitlement: { expirationDateTime: shift(1) } });
  refused(t, { entitlement: { expirationDateTime: NOW } }, "entitlement-expired");
});

test("checkActivation: time window notValidBefore is inclusive, notValidAfter exclusive", (t) => {
  const window = (init: MessageInitShape<typeof ActivationPolicySchema>["timeRestrictedActivationPolicy"]) => ({
    entitlement: { policy: policy({ timeRestrictedActivationPolicy: init }) },
  });
  refused(t, window({ notValidBeforeTimestamp: ts(1) }), "not-yet-valid");
  allowed(t, window({ notValidBeforeTimestamp: ts(0) }));
  allowed(t, window({ notValidAfterTimestamp: ts(1) }));
  refused(t, window({ notValidAfterTimestamp: ts(0) }), "validity-window-ended");
});

test("checkActivation: activationPeriod counts from the code's first activation", (t) => {
  const entitlementCase = { policy: policy({ timeRestrictedActivationPolicy: { activationPeriod: span(DAY) } }) };
  allowed(t, { entitlement: entitlementCase, code: { firstActivationAt: null } });
  allowed(t, { entitlement: entitlementCase, code: { firstActivationAt: shift(-DAY + 1) } });
  refused(t, { entitlement: entitlementCase, code: { firstActivationAt: shift(-DAY) } }, "validity-window-ended");
});

test("checkActivation: activationPeriod counts from the entitlement's first activation when earlier", (t) => {
  const facts = {
    policy: policy({ timeRestrictedActivationPolicy: { activationPeriod: span(DAY) } }),
    firstActivationAt: shift(-DAY),
  };
  refused(t, { entitlement: facts, code: { firstActivationAt: shift(-HOUR) } }, "validity-window-ended");
  t.deepEqual(firstActivationOf(entitlement(facts), code({ firstActivationAt: shift(-HOUR) })), shift(-DAY));
  t.deepEqual(firstActivationOf(entitlement(), code({ firstActivationAt: shift(-HOUR) })), shift(-HOUR));
  t.is(firstActivationOf(entitlement(), code()), null);
});

test("checkActivation: zero durations count as unset", (t) => {
  allowed(t, {
    entitlement: { policy: policy({ timeRestrictedActivationPolicy: { activationPeriod: span(0) } }) },
    code: { firstActivationAt: shift(-1000 * DAY) },
  });
});

const trialPolicy = (init: MessageInitShape<typeof ActivationPolicySchema>["trialActivationPolicy"]) =>
  policy({ trialActivationPolicy: init });

test("checkActivation: trial cannotActivateBefore (inclusive) and notValidAfter (exclusive)", (t) => {
  const trial = (init: Parameters<typeof trialPolicy>[0]) => ({
    entitlement: { isEntitlementTrial: true, policy: trialPolicy(init) },
  });
  refused(t, trial({ cannotActivateBeforeTimestamp: ts(1) }), "not-yet-valid");
  allowed(t, trial({ cannotActivateBeforeTimestamp: ts(0) }));
  allowed(t, trial({ notValidAfterTimestamp: ts(1) }));
  refused(t, trial({ notValidAfterTimestamp: ts(0) }), "trial-ended");
});

test("checkActivation: trialEndsAt set by the service is the trial's end", (t) => {
  const facts = (ms: number) => ({ isEntitlementTrial: true, policy: trialPolicy({ trialEndsAt: ts(ms) }) });
  allowed(t, { entitlement: facts(1) });
  refused(t, { entitlement: facts(0) }, "trial-ended");
});

test("checkActivation: trialPeriod counts from creation", (t) => {
  const facts = (createdAgo: number) => ({
    isEntitlementTrial: true,
    createdAt: shift(-createdAgo),
    policy: trialPolicy({ trialPeriod: span(14 * DAY) }),
  });
  allowed(t, { entitlement: facts(14 * DAY - 1) });
  refused(t, { entitlement: facts(14 * DAY) }, "trial-ended");
});

test("checkActivation: trialPeriod counts from first activation when so configured", (t) => {
  const facts = {
    isEntitlementTrial: true,
    createdAt: shift(-100 * DAY),
    policy: trialPolicy({ trialPeriod: span(14 * DAY), trialPeriodStartsAfterFirstActivation: true }),
  };
  allowed(t, { entitlement: facts, code: { firstActivationAt: null } });
  allowed(t, { entitlement: facts, code: { firstActivationAt: shift(-14 * DAY + 1) } });
  refused(t, { entitlement: facts, code: { firstActivationAt: shift(-14 * DAY) } }, "trial-ended");
});

test("checkActivation: a trial code makes the activation a trial on a non-trial entitlement", (t) => {
  const facts = { policy: trialPolicy({ trialEndsAt: ts(-1) }) };
  allowed(t, { entitlement: facts, code: { isTrialActivation: false } });
  refused(t, { entitlement: facts, code: { isTrialActivation: true } }, "trial-ended");
});

test("checkActivation: a trial without a trial policy is not limited in time", (t) => {
  allowed(t, { entitlement: { isEntitlementTrial: true }, code: { isTrialActivation: true } });
});

const subscriptionPolicy = (init: MessageInitShape<typeof ActivationPolicySchema>["subscriptionPolicy"]) =>
  policy({ subscriptionPolicy: { isSubscriptionActive: true, subscriptionPeriodsLeft: -1, ...init } });

test("checkActivation: inactive subscription is refused unless soft enforcement", (t) => {
  refused(t, { entitlement: { policy: subscriptionPolicy({ isSubscriptionActive: false }) } }, "subscription-inactive");
  allowed(t, { entitlement: { policy: subscriptionPolicy({ isSubscriptionActive: false, softEnforcement: true }) } });
  allowed(t, { entitlement: { policy: subscriptionPolicy({}) } });
});

test("checkActivation: subscription cannotActivateBefore (inclusive) and notValidAfter (exclusive)", (t) => {
  const sub = (init: Parameters<typeof subscriptionPolicy>[0]) => ({
    entitlement: { policy: subscriptionPolicy(init) },
  });
  refused(t, sub({ cannotActivateBeforeTimestamp: ts(1) }), "not-yet-valid");
  allowed(t, sub({ cannotActivateBeforeTimestamp: ts(0) }));
  allowed(t, sub({ notValidAfterTimestamp: ts(1) }));
  refused(t, sub({ notValidAfterTimestamp: ts(0) }), "subscription-ended");
  refused(t, sub({ notValidAfterTimestamp: ts(0), softEnforcement: true }), "subscription-ended");
});

test("checkActivation: lapsed subscription (no periods left, period over) is refused", (t) => {
  const sub = (nextRenewalMs: number, left: number) => ({
    entitlement: {
      policy: subscriptionPolicy({
        renewPeriod: "month",
        subscriptionPeriodsLeft: left,
        nextRenewalTimeStamp: ts(nextRenewalMs),
      }),
    },
  });
  allowed(t, sub(1, 0));
  refused(t, sub(0, 0), "subscription-ended");
  allowed(t, sub(-1, 1), "one period left: renewed at nextRenewalTimeStamp");
  allowed(t, sub(-10 * 365 * DAY, -1), "never runs out");
});

test("checkActivation: an ended subscription the scheduler also set inactive is told as ended", (t) => {
  const ended = subscriptionPolicy({ isSubscriptionActive: false, notValidAfterTimestamp: ts(0) });
  refused(t, { entitlement: { policy: ended } }, "subscription-ended");
});

test("authenticationLevel: the stricter of policy and code; unset = 1", (t) => {
  t.is(authenticationLevel(undefined, code()), 1);
  t.is(authenticationLevel(policy({ requiredAuthenticationLevel: 2 }), code({ requiredAuthenticationLevel: 1 })), 2);
  t.is(authenticationLevel(policy({ requiredAuthenticationLevel: 1 }), code({ requiredAuthenticationLevel: 3 })), 3);
});

test("checkActivation: level Email matches the invitation's email case-insensitively", (t) => {
  const emailCase = (given: string, level: "policy" | "code" = "code"): Case => ({
    entitlement: level === "policy" ? { policy: policy({ requiredAuthenticationLevel: 2 }) } : {},
    code: {
      email: "Ada@Example.com",
      requiredAuthenticationLevel: level === "code" ? RequiredAuthenticationLevel.EMAIL : 0,
    },
    ask: { email: given },
  });
  allowed(t, emailCase("ada@example.COM"));
  allowed(t, emailCase(" ada@example.com "));
  allowed(t, emailCase("ada@example.com", "policy"));
  refused(t, emailCase("eve@example.com"), "email-mismatch");
  refused(t, emailCase(""), "email-mismatch");
  refused(t, emailCase("eve@example.com", "policy"), "email-mismatch");
  refused(t, { code: { requiredAuthenticationLevel: 2, email: "" }, ask: { email: "" } }, "code-without-email");
  refused(
    t,
    {
      entitlement: { policy: policy({ requiredAuthenticationLevel: 2 }) },
      code: { email: " " },
      ask: { email: "ada@x.io" },
    },
    "code-without-email",
  );
  allowed(t, { code: { email: "ada@example.com" }, ask: { email: "eve@example.com" } }, "level 1 ignores email");
});

test("checkActivation: level InteractiveUser needs a signed-in invitee", (t) => {
  const level3 = (user: ActivationAsk["user"], invite: Partial<CodeFacts> = { userId: USER }): Case => ({
    code: { requiredAuthenticationLevel: 3, ...invite },
    ask: { user },
  });
  const error = t.throws(() => check(level3(null)), { instanceOf: DomainError });
  t.is(error?.kind, "permission-denied");
  t.is(error?.slug, "authentication-required");
  t.regex(error?.headers["www-authenticate"] ?? "", /^Bearer /);
  allowed(t, level3({ id: USER, groups: [] }));
  allowed(t, level3({ id: USER.toUpperCase(), groups: [] }));
  refused(t, level3({ id: "someone-else", groups: [] }), "user-not-invited");
  allowed(t, level3({ id: "someone-else", groups: [GROUP] }, { organizationGroupId: GROUP }));
  refused(t, level3({ id: "someone-else", groups: ["other"] }, { organizationGroupId: GROUP }), "user-not-invited");
  allowed(t, level3({ id: USER, groups: [] }, { userId: USER, organizationGroupId: GROUP }));
  allowed(t, level3({ id: "anyone", groups: [] }, {}), "a code naming nobody invites any signed-in user");
  allowed(t, {
    entitlement: { policy: policy({ requiredAuthenticationLevel: 3 }) },
    ask: { user: { id: "u", groups: [] } },
  });
  refused(
    t,
    { entitlement: { policy: policy({ requiredAuthenticationLevel: 3 }) } },
    "authentication-required",
    "permission-denied",
  );
});

test("checkActivation: requireOrganizationGroupMember needs a signed-in member at any level", (t) => {
  const facts = { policy: policy({ requireOrganizationGroupMember: GROUP }) };
  refused(t, { entitlement: facts }, "authentication-required", "permission-denied");
  refused(t, { entitlement: facts, ask: { user: { id: USER, groups: [] } } }, "organization-group-required");
  allowed(t, { entitlement: facts, ask: { user: { id: USER, groups: [GROUP.toUpperCase()] } } });
  refused(
    t,
    {
      entitlement: { policy: policy({ requireOrganizationGroupMember: GROUP, requiredAuthenticationLevel: 3 }) },
      code: { userId: USER },
      ask: { user: { id: USER, groups: ["other"] } },
    },
    "organization-group-required",
  );
});

test("checkActivation: requireProductCode wants <productCode>[:<productVersion>] of a product", (t) => {
  const facts: Partial<EntitlementFacts> = {
    policy: policy({ requireProductCode: true }),
    productIds: ["p1", "p2"],
    products: [
      { id: "p1", productCode: "ACME-CAD", productVersion: "2.1" },
      { id: "p2", productCode: "ACME-VIEW", productVersion: "1.0" },
    ],
  };
  const target = (targetSoftwareVersion: string): Case => ({ entitlement: facts, ask: { targetSoftwareVersion } });
  allowed(t, target("ACME-CAD"));
  allowed(t, target("acme-cad:2.1"));
  allowed(t, target("ACME-VIEW:1.0"));
  refused(t, target(""), "product-code-required");
  refused(t, target("2.1"), "product-code-required");
  refused(t, target("ACME-CAD:9.9"), "product-code-required");
  refused(t, target("ACME-VIEW:2.1"), "product-code-required");
  refused(t, target("ACME"), "product-code-required");
  allowed(t, { entitlement: { products: facts.products }, ask: { targetSoftwareVersion: "whatever" } });
  allowed(
    t,
    { entitlement: { products: null }, ask: { targetSoftwareVersion: "whatever" } },
    "codes not read, no rule",
  );
  const unread = { entitlement: { ...facts, products: null }, ask: { targetSoftwareVersion: "ACME-CAD" } };
  const error = t.throws(() => check(unread));
  t.regex(error?.message ?? "", /codes, not read/, "the rule never judges without the codes as stored");
});

test("checkActivation: a code bound to a fingerprint or pre-authorized devices refuses other devices", (t) => {
  allowed(t, { code: { fingerprint: "device-a" }, ask: { fingerprint: "device-a" } });
  refused(t, { code: { fingerprint: "device-a" }, ask: { fingerprint: "device-b" } }, "device-not-authorized");
  allowed(t, { code: { preAuthorizedDevices: ["device-a", "device-b"] }, ask: { fingerprint: "device-b" } });
  refused(
    t,
    { code: { preAuthorizedDevices: ["device-a"] }, ask: { fingerprint: "device-c" } },
    "device-not-authorized",
  );
  refused(t, { code: { preAuthorizedDevices: ["device-a"] }, ask: { fingerprint: "" } }, "device-not-authorized");
  refused(
    t,
    { code: { fingerprint: "device-b", preAuthorizedDevices: ["device-a"] }, ask: { fingerprint: "device-a" } },
    "device-not-authorized",
  );
});

test("checkActivation: consent is needed once unless given with the request", (t) => {
  refused(t, { code: { requiresUserConsent: true } }, "consent-required");
  allowed(t, { code: { requiresUserConsent: true }, ask: { acceptLicenseTerms: true } });
  allowed(t, { code: { requiresUserConsent: true, userConsent: true } });
});

test("checkActivation: code use limit answers 409 when reached; 0 = no limit", (t) => {
  allowed(t, { code: { maxActivationCodeUseCount: 3, activationCodeUseCount: 2 } });
  refused(
    t,
    { code: { maxActivationCodeUseCount: 3, activationCodeUseCount: 3 } },
    "code-use-limit-reached",
    "conflict",
  );
  allowed(t, { code: { maxActivationCodeUseCount: 0, activationCodeUseCount: 1000 } });
});

test("checkActivation: refusals come in the documented order", (t) => {
  // Every rule broken; fixing them one by one reveals each refusal in turn.
  const broken = policy({
    requiredAuthenticationLevel: 2,
    requireProductCode: true,
    timeRestrictedActivationPolicy: { notValidBeforeTimestamp: ts(1) },
    trialActivationPolicy: { trialEndsAt: ts(0) },
    subscriptionPolicy: { isSubscriptionActive: false, subscriptionPeriodsLeft: -1 },
  });
  const c: Required<Omit<Case, "now">> & { now: Date } = {
    now: NOW,
    entitlement: {
      isTemplate: true,
      isRevoked: true,
      allowLicenseActivation: false,
      expirationDateTime: NOW,
      productsUnavailable: true,
      isEntitlementTrial: true,
      policy: broken,
    },
    code: {
      isDeleted: true,
      expirationTimeStamp: NOW,
      email: "ada@example.com",
      fingerprint: "device-z",
      requiresUserConsent: true,
      maxActivationCodeUseCount: 1,
      activationCodeUseCount: 1,
    },
    ask: {},
  };
  const steps: [string, () => void][] = [
    ["code-deleted", () => Object.assign(c.code, { isDeleted: false })],
    ["code-expired", () => Object.assign(c.code, { expirationTimeStamp: null })],
    ["template-not-activatable", () => Object.assign(c.entitlement, { isTemplate: false })],
    ["entitlement-revoked", () => Object.assign(c.entitlement, { isRevoked: false })],
    ["activation-disabled", () => Object.assign(c.entitlement, { allowLicenseActivation: true })],
    ["entitlement-expired", () => Object.assign(c.entitlement, { expirationDateTime: null })],
    ["product-unavailable", () => Object.assign(c.entitlement, { productsUnavailable: false })],
    ["not-yet-valid", () => Object.assign(broken, { timeRestrictedActivationPolicy: undefined })],
    ["trial-ended", () => Object.assign(c.entitlement, { isEntitlementTrial: false })],
    ["subscription-inactive", () => Object.assign(broken.subscriptionPolicy ?? {}, { isSubscriptionActive: true })],
    ["email-mismatch", () => Object.assign(c.ask, { email: "ada@example.com" })],
    ["product-code-required", () => Object.assign(c.ask, { targetSoftwareVersion: "ACME-CAD:2.1" })],
    ["device-not-authorized", () => Object.assign(c.ask, { fingerprint: "device-z" })],
    ["consent-required", () => Object.assign(c.ask, { acceptLicenseTerms: true })],
    ["code-use-limit-reached", () => Object.assign(c.code, { maxActivationCodeUseCount: 0 })],
  ];
  for (const [slug, fix] of steps) {
    const error = t.throws(() => check(c), { instanceOf: DomainError });
    t.is(error?.slug, slug);
    fix();
  }
  allowed(t, c);
});

test("leaseFor: the policy's leaseTime caps the request; null asks for the policy's", (t) => {
  const facts = entitlement({
    policy: policy({ claimBasedActivation: { leaseTime: span(2 * HOUR), gracePeriod: span(30 * MINUTE) } }),
  });
  t.deepEqual(leaseFor(facts, code(), null, NOW, null), {
    leaseExpiresAt: shift(2 * HOUR),
    graceEndsAt: shift(2 * HOUR + 30 * MINUTE),
    trialEndsAt: null,
  });
  t.deepEqual(leaseFor(facts, code(), HOUR, NOW, null).leaseExpiresAt, shift(HOUR));
  t.deepEqual(leaseFor(facts, code(), HOUR, NOW, null).graceEndsAt, shift(HOUR + 30 * MINUTE));
  t.deepEqual(leaseFor(facts, code(), 2 * HOUR + 1, NOW, null).leaseExpiresAt, shift(2 * HOUR));
  t.deepEqual(leaseFor(facts, code(), 2 * HOUR, NOW, null).leaseExpiresAt, shift(2 * HOUR));
});

test("leaseFor: 30 days without a claim policy or its leaseTime; no grace", (t) => {
  t.is(DEFAULT_LEASE_MS, 30 * DAY);
  t.deepEqual(leaseFor(entitlement(), code(), null, NOW, null), {
    leaseExpiresAt: shift(30 * DAY),
    graceEndsAt: shift(30 * DAY),
    trialEndsAt: null,
  });
  const noLeaseTime = entitlement({ policy: policy({ claimBasedActivation: { numberOfSeats: 3 } }) });
  t.deepEqual(leaseFor(noLeaseTime, code(), null, NOW, null).leaseExpiresAt, shift(30 * DAY));
  t.deepEqual(leaseFor(entitlement(), code(), 40 * DAY, NOW, null).leaseExpiresAt, shift(30 * DAY));
});

test("leaseFor: a requested lease of zero, below zero or not a number answers 400", (t) => {
  for (const requested of [0, -1, Number.NaN]) {
    const error = t.throws(() => leaseFor(entitlement(), code(), requested, NOW, null), { instanceOf: DomainError });
    t.is(error?.kind, "invalid-argument");
    t.is(error?.errors[0]?.field, "requestedLeaseDuration");
  }
  t.notThrows(() => leaseFor(entitlement(), code(), 1, NOW, null));
});

test("leaseFor: lease and grace never pass the hard end", (t) => {
  const claim = { leaseTime: span(10 * DAY), gracePeriod: span(5 * DAY) };
  const expect = (facts: Partial<EntitlementFacts>, c: Partial<CodeFacts>, end: Date, first: Date | null = null) => {
    const lease = leaseFor(entitlement(facts), code(c), null, NOW, first);
    t.deepEqual(lease.leaseExpiresAt, end);
    t.deepEqual(lease.graceEndsAt, end);
  };
  const withClaim = (init: Exclude<MessageInitShape<typeof ActivationPolicySchema>, ActivationPolicy>) =>
    policy({ claimBasedActivation: claim, ...init });
  expect({ expirationDateTime: shift(DAY), policy: withClaim({}) }, {}, shift(DAY));
  expect(
    { policy: withClaim({ timeRestrictedActivationPolicy: { notValidAfterTimestamp: ts(2 * DAY) } }) },
    {},
    shift(2 * DAY),
  );
  expect(
    { policy: withClaim({ timeRestrictedActivationPolicy: { activationPeriod: span(3 * DAY) } }) },
    {},
    shift(2 * DAY),
    shift(-DAY),
  );
  expect(
    { policy: withClaim({ timeRestrictedActivationPolicy: { activationPeriod: span(3 * DAY) } }) },
    {},
    shift(3 * DAY),
    null,
  );
  expect(
    { policy: withClaim({ subscriptionPolicy: { isSubscriptionActive: true, notValidAfterTimestamp: ts(4 * DAY) } }) },
    {},
    shift(4 * DAY),
  );
  expect(
    {
      policy: withClaim({
        subscriptionPolicy: {
          isSubscriptionActive: true,
          renewPeriod: "day",
          subscriptionPeriodsLeft: 2,
          nextRenewalTimeStamp: ts(HOUR),
        },
      }),
    },
    {},
    shift(2 * DAY + HOUR),
  );
});

test("leaseFor: grace alone is capped when the lease ends before the hard end", (t) => {
  const facts = entitlement({
    expirationDateTime: shift(12 * HOUR),
    policy: policy({ claimBasedActivation: { leaseTime: span(10 * HOUR), gracePeriod: span(5 * HOUR) } }),
  });
  const lease = leaseFor(facts, code(), null, NOW, null);
  t.deepEqual(lease.leaseExpiresAt, shift(10 * HOUR));
  t.deepEqual(lease.graceEndsAt, shift(12 * HOUR));
});

test("leaseFor: trial activations end with the trial and report its end", (t) => {
  const trial = policy({
    trialActivationPolicy: { trialPeriod: span(7 * DAY), trialPeriodStartsAfterFirstActivation: true },
  });
  const first = leaseFor(entitlement({ isEntitlementTrial: true, policy: trial }), code(), null, NOW, null);
  t.deepEqual(first, { leaseExpiresAt: shift(7 * DAY), graceEndsAt: shift(7 * DAY), trialEndsAt: shift(7 * DAY) });
  const later = leaseFor(entitlement({ policy: trial }), code({ isTrialActivation: true }), null, NOW, shift(-6 * DAY));
  t.deepEqual(later.trialEndsAt, shift(DAY));
  t.deepEqual(later.leaseExpiresAt, shift(DAY));
  const notTrial = leaseFor(entitlement({ policy: trial }), code(), null, NOW, shift(-6 * DAY));
  t.is(notTrial.trialEndsAt, null);
  t.deepEqual(notTrial.leaseExpiresAt, shift(30 * DAY));
  const capped = policy({ trialActivationPolicy: { trialEndsAt: ts(5 * DAY), notValidAfterTimestamp: ts(2 * DAY) } });
  t.deepEqual(
    leaseFor(entitlement({ isEntitlementTrial: true, policy: capped }), code(), null, NOW, null).trialEndsAt,
    shift(2 * DAY),
  );
});

test("sessionStatus: ACTIVE, then GRACE_PERIOD exactly at lease end, then EXPIRED exactly at grace end", (t) => {
  const s = session({ leaseExpiresAt: shift(HOUR), graceEndsAt: shift(2 * HOUR) });
  t.is(sessionStatus(entitlement(), s, shift(HOUR - 1)), SessionStatus.ACTIVE);
  t.is(sessionStatus(entitlement(), s, shift(HOUR)), SessionStatus.GRACE_PERIOD);
  t.is(sessionStatus(entitlement(), s, shift(2 * HOUR - 1)), SessionStatus.GRACE_PERIOD);
  t.is(sessionStatus(entitlement(), s, shift(2 * HOUR)), SessionStatus.EXPIRED);
});

test("sessionStatus: RELEASED for released or ended sessions", (t) => {
  t.is(sessionStatus(entitlement(), session({ released: true }), NOW), SessionStatus.RELEASED);
  t.is(sessionStatus(entitlement(), session({ ended: true }), NOW), SessionStatus.RELEASED);
  t.is(sessionStatus(entitlement(), session({ released: true, graceEndsAt: shift(-1) }), NOW), SessionStatus.RELEASED);
});

test("sessionStatus: EXPIRED when the entitlement, trial or window has ended (exclusive ends)", (t) => {
  const s = session();
  t.is(sessionStatus(entitlement({ expirationDateTime: shift(1) }), s, NOW), SessionStatus.ACTIVE);
  t.is(sessionStatus(entitlement({ expirationDateTime: NOW }), s, NOW), SessionStatus.EXPIRED);
  const trial = policy({ trialActivationPolicy: { trialEndsAt: ts(0) } });
  t.is(sessionStatus(entitlement({ isEntitlementTrial: true, policy: trial }), s, NOW), SessionStatus.EXPIRED);
  t.is(sessionStatus(entitlement({ policy: trial }), session({ trial: true }), NOW), SessionStatus.EXPIRED);
  t.is(sessionStatus(entitlement({ policy: trial }), s, NOW), SessionStatus.ACTIVE, "not a trial session");
  const window = policy({ timeRestrictedActivationPolicy: { activationPeriod: span(DAY) } });
  t.is(
    sessionStatus(entitlement({ policy: window }), session({ firstActivationAt: shift(-DAY + 1) }), NOW),
    SessionStatus.ACTIVE,
  );
  t.is(
    sessionStatus(entitlement({ policy: window }), session({ firstActivationAt: shift(-DAY) }), NOW),
    SessionStatus.EXPIRED,
  );
  const after = policy({ timeRestrictedActivationPolicy: { notValidAfterTimestamp: ts(0) } });
  t.is(sessionStatus(entitlement({ policy: after }), s, NOW), SessionStatus.EXPIRED);
});

test("sessionStatus: subscription inactive is enforced, or only a grace period under soft enforcement", (t) => {
  const sub = (init: Parameters<typeof subscriptionPolicy>[0]) => entitlement({ policy: subscriptionPolicy(init) });
  t.is(sessionStatus(sub({}), session(), NOW), SessionStatus.ACTIVE);
  t.is(sessionStatus(sub({ isSubscriptionActive: false }), session(), NOW), SessionStatus.SUBSCRIPTION_INACTIVE);
  t.is(
    sessionStatus(sub({ isSubscriptionActive: false, softEnforcement: true }), session(), NOW),
    SessionStatus.GRACE_PERIOD,
  );
  t.is(
    sessionStatus(sub({ notValidAfterTimestamp: ts(0), softEnforcement: true }), session(), NOW),
    SessionStatus.SUBSCRIPTION_INACTIVE,
  );
  t.is(sessionStatus(sub({ notValidAfterTimestamp: ts(1) }), session(), NOW), SessionStatus.ACTIVE);
  const lapsing = { renewPeriod: "month", subscriptionPeriodsLeft: 0, nextRenewalTimeStamp: ts(0) };
  t.is(sessionStatus(sub(lapsing), session(), NOW), SessionStatus.SUBSCRIPTION_INACTIVE);
  t.is(sessionStatus(sub(lapsing), session(), shift(-1)), SessionStatus.ACTIVE);
});

test("sessionStatus: precedence REVOKED > EXPIRED > SUBSCRIPTION_INACTIVE > RELEASED > lapsed > GRACE_PERIOD", (t) => {
  const facts: Partial<EntitlementFacts> = {
    isRevoked: true,
    expirationDateTime: NOW,
    policy: subscriptionPolicy({ isSubscriptionActive: false }),
  };
  const s = session({ released: true, leaseExpiresAt: shift(-2), graceEndsAt: shift(-1) });
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.REVOKED);
  facts.isRevoked = false;
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.EXPIRED);
  facts.expirationDateTime = null;
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.SUBSCRIPTION_INACTIVE);
  facts.policy = subscriptionPolicy({ isSubscriptionActive: false, softEnforcement: true });
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.RELEASED);
  s.released = false;
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.EXPIRED);
  s.graceEndsAt = shift(1);
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.GRACE_PERIOD);
  s.leaseExpiresAt = shift(1);
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.GRACE_PERIOD, "soft-enforced inactive subscription");
  facts.policy = undefined;
  t.is(sessionStatus(entitlement(facts), s, NOW), SessionStatus.ACTIVE);
});

function feature(overrides: Partial<FeatureFacts> & { featureCode: string }): FeatureFacts {
  return {
    id: `id-${overrides.featureCode}`,
    value: "",
    isEnabled: true,
    isAvailableDuringTrialPeriod: false,
    isAvailableDuringGracePeriod: false,
    featureExpiration: null,
    ...overrides,
  };
}

test("enabledFeatures: enabled, unexpired (exclusive), and available in trial and grace when those apply", (t) => {
  const features = [
    feature({ featureCode: "plain" }),
    feature({ featureCode: "disabled", isEnabled: false, isAvailableDuringTrialPeriod: true }),
    feature({ featureCode: "expiring", featureExpiration: NOW }),
    feature({ featureCode: "lasting", featureExpiration: shift(1) }),
    feature({ featureCode: "trial", isAvailableDuringTrialPeriod: true }),
    feature({ featureCode: "grace", isAvailableDuringGracePeriod: true }),
    feature({ featureCode: "both", isAvailableDuringTrialPeriod: true, isAvailableDuringGracePeriod: true }),
  ];
  const codes = (state: { trial: boolean; inGrace: boolean }) =>
    enabledFeatures(features, state, NOW).map((f) => f.featureCode);
  t.deepEqual(codes({ trial: false, inGrace: false }), ["plain", "lasting", "trial", "grace", "both"]);
  t.deepEqual(codes({ trial: true, inGrace: false }), ["trial", "both"]);
  t.deepEqual(codes({ trial: false, inGrace: true }), ["grace", "both"]);
  t.deepEqual(codes({ trial: true, inGrace: true }), ["both"]);
  t.deepEqual(
    enabledFeatures(features, { trial: false, inGrace: false }, shift(-1)).map((f) => f.featureCode),
    ["plain", "expiring", "lasting", "trial", "grace", "both"],
  );
});
