import type { ActivationPolicy, TrialActivationPolicy } from "../../gen/provision/v1/entitlement_pb.js";
import { addMs, dateOf, durationMs, earliest } from "./policy-time.js";
import { effectiveSubscription } from "./subscription-periods.js";

/** What the ends of a license depend on. */
export interface LicenseTimeline {
  expirationDateTime: Date | null;
  createdAt: Date;
  policy: ActivationPolicy | undefined;
  /** The activation is a trial (trial entitlement or trial code). */
  trial: boolean;
  /** Start of activationPeriod and of a trial that starts after the first activation. */
  firstActivationAt: Date;
}

/** Whether an end of the license is counted from its first activation (activationPeriod, or such a trial). */
export function endsAfterFirstActivation(policy: ActivationPolicy | undefined): boolean {
  const trial = policy?.trialActivationPolicy;
  return (
    (trial !== undefined && trialAwaitsFirstActivation(trial)) ||
    policy?.timeRestrictedActivationPolicy?.activationPeriod !== undefined
  );
}

/** A trialPeriod counted from the first activation, not started yet (the service sets trialEndsAt when it does). */
export function trialAwaitsFirstActivation(trial: TrialActivationPolicy): boolean {
  return (
    trial.trialPeriodStartsAfterFirstActivation &&
    trial.trialEndsAt === undefined &&
    durationMs(trial.trialPeriod) !== null
  );
}

/**
 * End of the trial period alone: trialEndsAt when the service has set it, otherwise trialPeriod from the
 * entitlement's creation or (trialPeriodStartsAfterFirstActivation) from the first activation; null = no limit.
 * The service stores this as trialEndsAt when the trial starts.
 */
export function trialPeriodEnd(trial: TrialActivationPolicy, createdAt: Date, firstActivationAt: Date): Date | null {
  const set = dateOf(trial.trialEndsAt);
  if (set !== null) return set;
  const period = durationMs(trial.trialPeriod);
  if (period === null) return null;
  return addMs(trial.trialPeriodStartsAfterFirstActivation ? firstActivationAt : createdAt, period);
}

/** End of a trial activation: the trial period or the trial's notValidAfterTimestamp, the earlier. */
export function trialEnd(timeline: LicenseTimeline): Date | null {
  const trial = timeline.policy?.trialActivationPolicy;
  if (!timeline.trial || trial === undefined) return null;
  return earliest(
    trialPeriodEnd(trial, timeline.createdAt, timeline.firstActivationAt),
    dateOf(trial.notValidAfterTimestamp),
  );
}

/** End of the time-restricted window: notValidAfterTimestamp or first activation + activationPeriod. */
export function windowEnd(timeline: LicenseTimeline): Date | null {
  const window = timeline.policy?.timeRestrictedActivationPolicy;
  if (window === undefined) return null;
  const period = durationMs(window.activationPeriod);
  return earliest(
    dateOf(window.notValidAfterTimestamp),
    period === null ? null : addMs(timeline.firstActivationAt, period),
  );
}

export function subscriptionEnd(policy: ActivationPolicy | undefined, now: Date): Date | null {
  const subscription = policy?.subscriptionPolicy;
  return subscription === undefined ? null : effectiveSubscription(subscription, now).endsAt;
}

/** The instant past which nothing of the license may run: the earliest of all its ends. */
export function hardEnd(timeline: LicenseTimeline, now: Date): Date | null {
  return earliest(
    timeline.expirationDateTime,
    trialEnd(timeline),
    windowEnd(timeline),
    subscriptionEnd(timeline.policy, now),
  );
}
