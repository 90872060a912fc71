import { toJson } from "@bufbuild/protobuf";
import { type SubscriptionFilter, SubscriptionFilterSchema } from "../../gen/provision/v1/webhook_pb.js";
import { DomainError, invalidField } from "../platform/errors.js";
import type { Violations } from "../platform/validation.js";
import { checkCallbackScopes } from "./callback-scopes.js";
import { checkEventTypePatterns, distinctEventTypePatterns } from "./event-catalog.js";
import { resolveTarget } from "./safe-resolve.js";
import { checkFilter } from "./subscription-filter.js";
import { TIMESTAMP_FORMATS, type TimestampFormat } from "./subscription-states.js";
import { checkWebhookUrl, isRefusal } from "./target-policy.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";
import { webhookSecretProblem } from "./webhook-secrets.js";

export const MAX_DESCRIPTION = 1024;
/** The stored URL's column holds this many characters. */
export const MAX_URL = 2048;

/** The event type patterns as stored, or violations added. */
export function eventTypesOf(violations: Violations, patterns: string[]): string[] {
  for (const violation of checkEventTypePatterns(patterns)) violations.add(violation.field, violation.message);
  return distinctEventTypePatterns(patterns);
}

/** The callback scopes as stored (each within the caller's), or violations added. */
export function callbackScopesOf(violations: Violations, requested: string[], callerScopes: string[]): string[] {
  const checked = checkCallbackScopes(requested, callerScopes);
  for (const violation of checked.violations) violations.add(violation.field, violation.message);
  return checked.scopes;
}

/** The filter as stored (REST JSON text), or null; violations added. */
export function filterOf(violations: Violations, filter: SubscriptionFilter | undefined): string | null {
  if (!filter) return null;
  for (const violation of checkFilter(filter)) violations.add(violation.field, violation.message);
  return JSON.stringify(toJson(SubscriptionFilterSchema, filter, { enumAsInteger: true }));
}

export function timestampFormatOf(violations: Violations, format: string | undefined): TimestampFormat {
  if (format === undefined || format === "") return "rfc3339";
  if (!(TIMESTAMP_FORMATS as readonly string[]).includes(format)) {
    violations.add("timestampFormat", `must be one of ${TIMESTAMP_FORMATS.join(", ")}`);
  }
  return format as TimestampFormat;
}

export function secretOf(violations: Violations, secret: string | undefined): void {
  if (secret === undefined) return;
  const problem = webhookSecretProblem(secret);
  if (problem) violations.add("secret", problem);
}

/**
 * The endpoint URL after the request-forgery rules: a URL the service may post to, every address its host
 * resolves to allowed (checked again at each delivery).
 */
export async function checkedUrl(deps: WebhookDependencies, url: string): Promise<string> {
  if (!url.trim()) throw invalidField("url", "is required");
  const tooLong = `must be at most ${MAX_URL} characters, as normalized`;
  if (url.length > MAX_URL) throw invalidField("url", tooLong);
  const target = checkWebhookUrl(url, deps.trustedTargets);
  if (isRefusal(target)) throw invalidField("url", target.refusal);
  if (target.url.href.length > MAX_URL) throw invalidField("url", tooLong);
  const resolved = await resolveTarget(target, deps.trustedTargets, deps.lookup);
  if (isRefusal(resolved)) throw invalidField("url", resolved.refusal);
  return target.url.href;
}

export function notPending(action: string): DomainError {
  return new DomainError("failed-precondition", `${action} only a subscription in state PendingVerification`, {
    slug: "subscription-state",
  });
}
