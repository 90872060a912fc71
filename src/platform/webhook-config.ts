import { parseRetrySchedule } from "../webhooks/retry-schedule.js";
import { parseTrustedTargets, type TrustedTargets } from "../webhooks/target-policy.js";
import { ConfigError, integer, optional } from "./config.js";
import { parseDuration } from "./durations.js";

export interface WebhookConfig {
  /** Delays before each attempt (ms); the first is usually 0. */
  retrySchedule: number[];
  timeoutMs: number;
  /** Exempt from the request-forgery rules (plain http allowed): host names, addresses, networks. */
  trustedTargets: TrustedTargets;
  retentionDays: number;
  /** Deliveries under way at once on one instance. */
  concurrency: number;
  pollIntervalMs: number;
  callbackTokenTtlSeconds: number;
  /** An Active subscription whose deliveries have failed this long without a success is Suspended. */
  suspendAfterMs: number;
  /** Lead times of Entitlement.Expiring and Entitlement.TrialExpiring. */
  expiringNoticeMs: number;
  trialExpiringNoticeMs: number;
  /** How often the instance holding the scheduler lease runs the time-driven work. */
  schedulerIntervalMs: number;
}

const DEFAULT_SCHEDULE = "0s,5s,5m,30m,2h,5h,10h,10h";

export function webhookConfig(env: NodeJS.ProcessEnv): WebhookConfig {
  return {
    retrySchedule: parsed(
      "WEBHOOK_RETRY_SCHEDULE",
      optional(env, "WEBHOOK_RETRY_SCHEDULE") ?? DEFAULT_SCHEDULE,
      parseRetrySchedule,
    ),
    timeoutMs: integer(env, "WEBHOOK_TIMEOUT_MS", 15_000, 100, 120_000),
    trustedTargets: parsed(
      "WEBHOOK_TRUSTED_TARGETS",
      optional(env, "WEBHOOK_TRUSTED_TARGETS") ?? "",
      parseTrustedTargets,
    ),
    retentionDays: integer(env, "WEBHOOK_RETENTION_DAYS", 30, 1, 3650),
    concurrency: integer(env, "WEBHOOK_CONCURRENCY", 64, 1, 1024),
    pollIntervalMs: integer(env, "WEBHOOK_POLL_INTERVAL_MS", 1000, 50, 60_000),
    callbackTokenTtlSeconds: integer(env, "WEBHOOK_CALLBACK_TOKEN_TTL_SECONDS", 300, 60, 900),
    suspendAfterMs: duration(env, "WEBHOOK_SUSPEND_AFTER", "5d", { min: "1m", max: "365d" }),
    expiringNoticeMs: duration(env, "WEBHOOK_EXPIRING_NOTICE", "7d", NOTICE_RANGE),
    trialExpiringNoticeMs: duration(env, "WEBHOOK_TRIAL_EXPIRING_NOTICE", "3d", NOTICE_RANGE),
    schedulerIntervalMs: integer(env, "SCHEDULER_INTERVAL_MS", 60_000, 100, 3_600_000),
  };
}

const NOTICE_RANGE = { min: "0s", max: "365d" };

function duration(
  env: NodeJS.ProcessEnv,
  variable: string,
  fallback: string,
  range: { min: string; max: string },
): number {
  const ms = parsed(variable, optional(env, variable) ?? fallback, parseDuration);
  if (ms < parseDuration(range.min) || ms > parseDuration(range.max)) {
    throw new ConfigError(variable, `must be between ${range.min} and ${range.max}`);
  }
  return ms;
}

function parsed<T>(variable: string, text: string, parse: (text: string) => T): T {
  try {
    return parse(text);
  } catch (error) {
    throw new ConfigError(variable, (error as Error).message);
  }
}
