import { create } from "@bufbuild/protobuf";
import { durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type CreateSubscriptionRequest,
  type CreateSubscriptionResponse,
  CreateSubscriptionResponseSchema,
  type DeleteSubscriptionRequest,
  type DeleteSubscriptionResponse,
  DeleteSubscriptionResponseSchema,
  type GetSubscriptionRequest,
  type GetSubscriptionResponse,
  GetSubscriptionResponseSchema,
  type ListSubscriptionsRequest,
  type ListSubscriptionsResponse,
  ListSubscriptionsResponseSchema,
  type RotateSubscriptionSecretRequest,
  type RotateSubscriptionSecretResponse,
  RotateSubscriptionSecretResponseSchema,
  SubscriptionState,
  type VerifySubscriptionRequest,
  type VerifySubscriptionResponse,
  VerifySubscriptionResponseSchema,
} from "../../gen/provision/v1/webhook_pb.js";
import { clientPrincipalKey } from "../auth/auth-interceptor.js";
import { refuseScopesBeyondCaller } from "../auth/caller-scopes.js";
import { inTransaction, readSerially } from "../platform/database.js";
import { DomainError, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { sendChallenge } from "./direct-delivery.js";
import type { WebhookSubscriptionRow } from "./entities.js";
import { sealSecret } from "./subscription-secrets.js";
import {
  callbackScopesOf,
  checkedUrl,
  eventTypesOf,
  filterOf,
  MAX_DESCRIPTION,
  notPending,
  secretOf,
  timestampFormatOf,
} from "./subscription-validation.js";
import type { WebhookDependencies } from "./webhook-dependencies.js";
import { toSubscription } from "./webhook-mappers.js";
import { generateWebhookSecret } from "./webhook-secrets.js";

const DEFAULT_OVERLAP_MS = 24 * 3600_000;
const MAX_OVERLAP_MS = 7 * 24 * 3600_000;

/** The calling client: callback scopes must lie within its scopes, and callback tokens act as it. */
export function callerOf(context: HandlerContext): { clientId: string; scopes: string[] } {
  const client = context.values.get(clientPrincipalKey);
  if (!client) throw new DomainError("internal", "no client in the request context");
  return { clientId: client.clientId, scopes: client.scopes };
}

/** A new subscription, PendingVerification, and its challenge on its way; the secret is answered this once. */
export async function createSubscription(
  deps: WebhookDependencies,
  request: CreateSubscriptionRequest,
  context: HandlerContext,
): Promise<CreateSubscriptionResponse> {
  const providerId = providerOf(context);
  const caller = callerOf(context);
  const violations = new Violations().maxLength("description", request.description, MAX_DESCRIPTION);
  const eventTypes = eventTypesOf(violations, request.eventTypes);
  const callbackScopes = callbackScopesOf(violations, request.callbackScopes, caller.scopes);
  const filter = filterOf(violations, request.filter);
  const timestampFormat = timestampFormatOf(violations, request.timestampFormat);
  secretOf(violations, request.secret);
  violations.throwIfAny();
  const url = await checkedUrl(deps, request.url);
  const secret = request.secret ?? generateWebhookSecret();
  const now = deps.clock.now();
  const row: WebhookSubscriptionRow = {
    id: deps.newId(),
    providerId,
    url,
    eventTypes: JSON.stringify(eventTypes),
    filter,
    callbackScopes: JSON.stringify(callbackScopes),
    callbackClientId: caller.clientId,
    state: SubscriptionState.PENDING_VERIFICATION,
    description: request.description,
    timestampFormat,
    secret: sealSecret(secret, deps.keyEncryptionKey),
    previousSecret: null,
    previousSecretExpiresAt: null,
    challengeDeliveryId: null,
    failingSince: null,
    verifiedAt: null,
    deletedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  await inTransaction(deps.dataSource, async (manager) => {
    await sendChallenge(deps, manager, row, now);
    await deps.subscriptions.insert(manager, row);
  });
  deps.outbox.committed();
  return create(CreateSubscriptionResponseSchema, { subscription: toSubscription(row), secret });
}

export async function listSubscriptions(
  deps: WebhookDependencies,
  request: ListSubscriptionsRequest,
  context: HandlerContext,
): Promise<ListSubscriptionsResponse> {
  const providerId = providerOf(context);
  const page = resolvePage(request.pageNumber, request.pageSize);
  const { dataSource } = deps;
  const { rows, total } = await readSerially(dataSource, () =>
    deps.subscriptions.page(dataSource.manager, providerId, page.offset, page.pageSize),
  );
  return create(ListSubscriptionsResponseSchema, {
    ...pageInfo(page, total, rows.length),
    items: rows.map(toSubscription),
  });
}

export async function getSubscription(
  deps: WebhookDependencies,
  request: GetSubscriptionRequest,
  context: HandlerContext,
): Promise<GetSubscriptionResponse> {
  const row = await findSubscription(deps, providerOf(context), request.id);
  return create(GetSubscriptionResponseSchema, { subscription: toSubscription(row) });
}

/** The provider's subscription (read outside a transaction); 404 for anyone else's. */
export async function findSubscription(deps: WebhookDependencies, providerId: string, id: string) {
  const subscriptionId = requireUuid("id", id);
  const { dataSource } = deps;
  const row = await readSerially(dataSource, () =>
    deps.subscriptions.find(dataSource.manager, providerId, subscriptionId),
  );
  if (!row) throw notFound("subscription", subscriptionId);
  return row;
}

/**
 * Runs `change` on the provider's subscription, locked, and saves what it leaves; 404 for anyone else's, 403
 * `insufficient-scope` for a caller not holding every callback scope the subscription carries.
 */
export async function changeSubscription<T>(
  deps: WebhookDependencies,
  context: HandlerContext,
  id: string,
  change: (row: WebhookSubscriptionRow, manager: import("typeorm").EntityManager, now: Date) => Promise<T>,
): Promise<{ row: WebhookSubscriptionRow; result: T }> {
  const providerId = providerOf(context);
  const subscriptionId = requireUuid("id", id);
  const now = deps.clock.now();
  const changed = await inTransaction(deps.dataSource, async (manager) => {
    const row = await deps.subscriptions.find(manager, providerId, subscriptionId, true);
    if (!row) throw notFound("subscription", subscriptionId);
    // Its callback tokens carry these scopes to its URL: a client holding less may not redirect or re-key them.
    const carried = JSON.parse(row.callbackScopes) as string[];
    refuseScopesBeyondCaller(context, carried, "manage a subscription whose callback scopes you do not hold");
    const result = await change(row, manager, now);
    row.updatedAt = now;
    await deps.subscriptions.update(manager, row);
    return { row, result };
  });
  deps.outbox.committed();
  await deps.callbackGrants?.changed(subscriptionId);
  return changed;
}

/** Soft delete: the subscription is no longer answered; its pending deliveries are cancelled, the audit kept. */
export async function deleteSubscription(
  deps: WebhookDependencies,
  request: DeleteSubscriptionRequest,
  context: HandlerContext,
): Promise<DeleteSubscriptionResponse> {
  await changeSubscription(deps, context, request.id, async (row, manager, now) => {
    row.deletedAt = now;
    await deps.deliveries.cancelPending(manager, row.id, now);
  });
  return create(DeleteSubscriptionResponseSchema, {});
}

/** A new challenge for a subscription still waiting for one to be answered. */
export async function verifySubscription(
  deps: WebhookDependencies,
  request: VerifySubscriptionRequest,
  context: HandlerContext,
): Promise<VerifySubscriptionResponse> {
  const { row, result } = await changeSubscription(deps, context, request.id, async (row, manager, now) => {
    if (row.state !== SubscriptionState.PENDING_VERIFICATION) throw notPending("a new challenge is sent to");
    return sendChallenge(deps, manager, row, now);
  });
  return create(VerifySubscriptionResponseSchema, { subscription: toSubscription(row), deliveryId: result.id });
}

/** A new secret; the previous one keeps signing alongside for the overlap. */
export async function rotateSubscriptionSecret(
  deps: WebhookDependencies,
  request: RotateSubscriptionSecretRequest,
  context: HandlerContext,
): Promise<RotateSubscriptionSecretResponse> {
  const violations = new Violations();
  secretOf(violations, request.secret);
  const overlapMs = request.overlapPeriod ? durationMs(request.overlapPeriod) : DEFAULT_OVERLAP_MS;
  if (!(overlapMs >= 0 && overlapMs <= MAX_OVERLAP_MS)) violations.add("overlapPeriod", "must be between 0 and 7 days");
  violations.throwIfAny();
  const secret = request.secret ?? generateWebhookSecret();
  const { row } = await changeSubscription(deps, context, request.id, async (row, _manager, now) => {
    row.previousSecret = row.secret;
    row.previousSecretExpiresAt = new Date(now.getTime() + overlapMs);
    row.secret = sealSecret(secret, deps.keyEncryptionKey);
  });
  return create(RotateSubscriptionSecretResponseSchema, {
    secret,
    previousSecretExpiresAt: timestampFromDate(row.previousSecretExpiresAt as Date),
  });
}
