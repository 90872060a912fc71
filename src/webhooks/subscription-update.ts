import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "typeorm";
import {
  SubscriptionState,
  type UpdateSubscriptionRequest,
  type UpdateSubscriptionResponse,
  UpdateSubscriptionResponseSchema,
} from "../../gen/provision/v1/webhook_pb.js";
import { invalidField } from "../platform/errors.js";
import { Violations } from "../platform/validation.js";
import { sendChallenge } from "./direct-delivery.js";
import type { WebhookSubscriptionRow } from "./entities.js";
import { callerOf, changeSubscription } from "./subscription-admin.js";
import {
  callbackScopesOf,
  checkedUrl,
  eventTypesOf,
  filterOf,
  MAX_DESCRIPTION,
  timestampFormatOf,
} from "./subscription-validation.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";
import { toSubscription } from "./webhook-mappers.js";

const MASKABLE = new Set(["url", "eventTypes", "filter", "callbackScopes", "description", "state", "timestampFormat"]);

/**
 * Partial update (see UpdateSubscriptionRequest). A new URL, or re-enabling a Disabled or Suspended
 * subscription, puts it back in PendingVerification with a new challenge: its pending deliveries wait (parked)
 * until the endpoint answers it. Disabling cancels the pending deliveries.
 */
export async function updateSubscription(
  deps: WebhookDependencies,
  request: UpdateSubscriptionRequest,
  context: HandlerContext,
): Promise<UpdateSubscriptionResponse> {
  const named = maskOf(request);
  const changes = await changesOf(deps, request, named, callerOf(context));
  const { row } = await changeSubscription(deps, context, request.id, async (row, manager, now) => {
    const { url, state, ...plain } = changes;
    Object.assign(row, plain);
    if (plain.callbackScopes !== undefined) row.callbackClientId = callerOf(context).clientId;
    if (url !== undefined && url !== row.url) {
      row.url = url;
      // A Disabled subscription stays so: enabling it sends the new URL its challenge.
      if (row.state !== SubscriptionState.DISABLED) await reverify(deps, manager, row, now);
    }
    if (state !== undefined) await applyState(deps, manager, row, state, now);
  });
  return create(UpdateSubscriptionResponseSchema, { subscription: toSubscription(row) });
}

/** The fields to change: those named by the mask, or else those present. */
function maskOf(request: UpdateSubscriptionRequest): (field: string, present: boolean) => boolean {
  const paths = request.updateMask?.paths;
  if (!paths || paths.length === 0) return (_field, present) => present;
  const names = new Set(paths.map(camelCase));
  const unknown = [...names].filter((name) => !MASKABLE.has(name));
  if (unknown.length > 0)
    throw invalidField("updateMask", `names fields that cannot be changed: ${unknown.join(", ")}`);
  return (field) => names.has(field);
}

type Changes = Partial<
  Pick<WebhookSubscriptionRow, "eventTypes" | "filter" | "callbackScopes" | "description" | "timestampFormat">
> & { url?: string; state?: SubscriptionState };

async function changesOf(
  deps: WebhookDependencies,
  request: UpdateSubscriptionRequest,
  named: (field: string, present: boolean) => boolean,
  caller: { scopes: string[] },
): Promise<Changes> {
  const violations = new Violations();
  const changes: Changes = {};
  if (named("eventTypes", request.eventTypes.length > 0)) {
    if (request.eventTypes.length === 0) violations.add("eventTypes", "cannot be emptied");
    else changes.eventTypes = JSON.stringify(eventTypesOf(violations, request.eventTypes));
  }
  if (named("filter", request.filter !== undefined)) changes.filter = filterOf(violations, request.filter);
  if (named("callbackScopes", request.callbackScopes.length > 0)) {
    changes.callbackScopes = JSON.stringify(callbackScopesOf(violations, request.callbackScopes, caller.scopes));
  }
  if (named("description", request.description !== undefined)) {
    violations.maxLength("description", request.description, MAX_DESCRIPTION);
    changes.description = request.description ?? "";
  }
  if (named("timestampFormat", request.timestampFormat !== undefined)) {
    changes.timestampFormat = timestampFormatOf(violations, request.timestampFormat);
  }
  if (named("state", request.state !== undefined)) changes.state = stateOf(violations, request.state);
  violations.throwIfAny();
  if (named("url", request.url !== undefined)) changes.url = await checkedUrl(deps, request.url ?? "");
  return changes;
}

function stateOf(violations: Violations, state: SubscriptionState | undefined): SubscriptionState | undefined {
  if (state !== SubscriptionState.ACTIVE && state !== SubscriptionState.DISABLED) {
    violations.add("state", "only Active (2, re-enable) or Disabled (3) may be set");
  }
  return state;
}

async function applyState(
  deps: WebhookDependencies,
  manager: EntityManager,
  row: WebhookSubscriptionRow,
  state: SubscriptionState,
  now: Date,
): Promise<void> {
  if (state === SubscriptionState.DISABLED) {
    if (row.state === SubscriptionState.DISABLED) return;
    row.state = SubscriptionState.DISABLED;
    row.challengeDeliveryId = null;
    await deps.deliveries.cancelPending(manager, row.id, now);
    return;
  }
  if (row.state === SubscriptionState.DISABLED || row.state === SubscriptionState.SUSPENDED) {
    await reverify(deps, manager, row, now);
  }
}

/** Back to PendingVerification with a new challenge; the pending deliveries wait for its answer. */
async function reverify(deps: WebhookDependencies, manager: EntityManager, row: WebhookSubscriptionRow, now: Date) {
  await deps.deliveries.parkPending(manager, row.id);
  row.state = SubscriptionState.PENDING_VERIFICATION;
  row.failingSince = null;
  await sendChallenge(deps, manager, row, now);
}

function camelCase(path: string): string {
  return path.trim().replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
}
