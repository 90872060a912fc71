import { fromJsonString } from "@bufbuild/protobuf";
import { type ActivationPolicy, ActivationPolicySchema } from "../../gen/provision/v1/entitlement_pb.js";
import { setNewest } from "../platform/bounded-map.js";

/** Distinct policy texts kept parsed, a few KB each at most. */
const POLICIES_KEPT = 1_000;

const parsed = new Map<string, ActivationPolicy>();

/**
 * A stored policy's text parsed, one frozen copy shared by every read of the same text (an entitlement's
 * activations, renewals and check-ins read the same text until it changes): parsing it was a few percent of an
 * activation. Callers that change a policy clone it first; changing the shared copy throws.
 */
export function sharedPolicyOf(text: string | null): ActivationPolicy | undefined {
  if (!text) return undefined;
  const kept = parsed.get(text);
  if (kept) return kept;
  const policy = deepFreeze(fromJsonString(ActivationPolicySchema, text));
  setNewest(parsed, text, policy, POLICIES_KEPT);
  return policy;
}

function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || ArrayBuffer.isView(value)) return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}
