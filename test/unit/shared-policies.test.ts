import { toJsonString } from "@bufbuild/protobuf";
import test from "ava";
import { ActivationPolicySchema } from "../../gen/provision/v1/entitlement_pb.js";
import { sharedPolicyOf } from "../../src/licensing/shared-policies.js";

const TEXT = JSON.stringify({
  claimBasedActivation: { numberOfSeats: 3, isFloatingLicense: true },
  trialActivationPolicy: { trialPeriod: "604800s", trialPeriodStartsAfterFirstActivation: true },
});

test("a policy text is parsed once and shared, frozen to the bottom", (t) => {
  const policy = sharedPolicyOf(TEXT);
  t.is(sharedPolicyOf(TEXT), policy);
  t.is(policy?.claimBasedActivation?.numberOfSeats, 3);
  t.throws(() => {
    (policy as { claimBasedActivation: { numberOfSeats: number } }).claimBasedActivation.numberOfSeats = 4;
  });
  t.throws(() => {
    (policy as { trialActivationPolicy: { trialEndsAt: unknown } }).trialActivationPolicy.trialEndsAt = {};
  });
  t.is(
    toJsonString(ActivationPolicySchema, policy as never),
    toJsonString(ActivationPolicySchema, sharedPolicyOf(TEXT) as never),
  );
});

test("another text is another policy; no text is no policy", (t) => {
  const other = sharedPolicyOf(TEXT.replace('"numberOfSeats":3', '"numberOfSeats":5'));
  t.is(other?.claimBasedActivation?.numberOfSeats, 5);
  t.not(other, sharedPolicyOf(TEXT));
  t.is(sharedPolicyOf(null), undefined);
  t.is(sharedPolicyOf(""), undefined);
});
