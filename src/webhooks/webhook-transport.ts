import { performance } from "node:perf_hooks";
import type { AttemptResult } from "./delivery-outcome.js";
import { sendWebhook, timeoutText, type WebhookAgents } from "./http-sender.js";
import { type HostLookup, resolveTarget } from "./safe-resolve.js";
import { checkWebhookUrl, isRefusal, type TrustedTargets } from "./target-policy.js";

export interface TransportSettings {
  timeoutMs: number;
  trustedTargets: TrustedTargets;
  lookup?: HostLookup;
  agents?: WebhookAgents;
}

/** An attempt's result, with the response's `webhook-signature` (a challenge's reply is signed). */
export type PostResult = AttemptResult & { responseSignature?: string };

/**
 * Posts a delivery to a subscription's URL after checking it again: the URL rules, then every address its host
 * resolves to now, connecting to the address checked. A refused target is an attempt without an answer. The
 * attempt's time limit and duration include the resolution.
 */
export async function postToTarget(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  settings: TransportSettings,
): Promise<PostResult> {
  const started = performance.now();
  const target = checkWebhookUrl(url, settings.trustedTargets);
  if (isRefusal(target)) return { error: target.refusal, durationMs: performance.now() - started };
  const resolved = await resolveTarget(target, settings.trustedTargets, settings.lookup, settings.timeoutMs);
  const spentMs = performance.now() - started;
  if (isRefusal(resolved)) return { error: resolved.refusal, durationMs: spentMs };
  if (spentMs >= settings.timeoutMs) return { error: timeoutText(settings.timeoutMs), durationMs: spentMs };
  const answer = await sendWebhook(
    { target, address: resolved.address, headers, body, timeoutMs: settings.timeoutMs, spentMs },
    settings.agents,
  );
  if ("error" in answer) return answer;
  const retryAfter = answer.headers["retry-after"];
  const signature = answer.headers["webhook-signature"];
  return {
    status: answer.status,
    retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
    durationMs: answer.durationMs,
    body: answer.body,
    truncated: answer.truncated,
    responseSignature: Array.isArray(signature) ? signature.join(" ") : signature,
  };
}
