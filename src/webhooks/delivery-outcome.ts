import { DELIVERY_STATUS, type Settlement } from "./delivery-store.js";
import type { WebhookDeliveryRow } from "./entities.js";
import { nextAttemptDelayMs, parseRetryAfter } from "./retry-schedule.js";

/** What one attempt got back: an HTTP answer, or why there was none. */
export type AttemptResult =
  | { status: number; retryAfter?: string; durationMs: number; body: Buffer; truncated: boolean }
  | { error: string; durationMs: number };

export type { Settlement } from "./delivery-store.js";

export interface Outcome {
  settlement: Settlement;
  /** The endpoint answered 410 Gone: its subscription is disabled. */
  gone: boolean;
  /** The attempt succeeded. */
  succeeded: boolean;
}

export interface RetryPolicy {
  schedule: readonly number[];
  random: () => number;
}

/**
 * The delivery's state after an attempt: succeeded on 2xx (and, for a challenge, a valid reply: `refusal`
 * names what was wrong with it otherwise); failed for good on 410; otherwise retried on the schedule, at
 * least as late as a Retry-After asks, or failed once the schedule is exhausted.
 */
export function outcomeOf(
  delivery: WebhookDeliveryRow,
  result: AttemptResult,
  policy: RetryPolicy,
  now: Date,
  refusal?: string,
): Outcome {
  const statusCode = "status" in result ? result.status : 0;
  const error = "error" in result ? result.error : (refusal ?? (isSuccess(statusCode) ? "" : `HTTP ${statusCode}`));
  const base = { lastStatusCode: statusCode, lastError: error };
  if (isSuccess(statusCode) && !refusal) {
    return {
      settlement: {
        ...base,
        status: DELIVERY_STATUS.succeeded,
        nextAttemptAt: null,
        scheduleStep: delivery.scheduleStep + 1,
        completedAt: now,
      },
      gone: false,
      succeeded: true,
    };
  }
  if (statusCode === 410) {
    return {
      settlement: {
        ...base,
        status: DELIVERY_STATUS.failed,
        nextAttemptAt: null,
        scheduleStep: delivery.scheduleStep + 1,
        completedAt: now,
      },
      gone: true,
      succeeded: false,
    };
  }
  const step = delivery.scheduleStep + 1;
  const retryAfterMs = "status" in result ? parseRetryAfter(result.retryAfter, now) : undefined;
  const delay = nextAttemptDelayMs(policy.schedule, step, policy.random, retryAfterMs);
  const settlement: Settlement =
    delay === null
      ? { ...base, status: DELIVERY_STATUS.failed, nextAttemptAt: null, scheduleStep: step, completedAt: now }
      : {
          ...base,
          status: DELIVERY_STATUS.pending,
          nextAttemptAt: new Date(now.getTime() + delay),
          scheduleStep: step,
          completedAt: null,
        };
  return { settlement, gone: false, succeeded: false };
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}
