import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type Client,
  ClientSchema,
  type CreateClientRequest,
  type CreateClientResponse,
  CreateClientResponseSchema,
  type DeleteClientRequest,
  type DeleteClientResponse,
  DeleteClientResponseSchema,
  type GetClientRequest,
  type GetClientResponse,
  GetClientResponseSchema,
  type ListClientsRequest,
  type ListClientsResponse,
  ListClientsResponseSchema,
  type RotateClientSecretRequest,
  type RotateClientSecretResponse,
  RotateClientSecretResponseSchema,
  type SetClientEnabledRequest,
  type SetClientEnabledResponse,
  SetClientEnabledResponseSchema,
} from "../../gen/provision/v1/client_admin_pb.js";
import { invalidField, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { refuseScopesBeyondCaller } from "./caller-scopes.js";
import type { ClientAdminDependencies } from "./client-admin-dependencies.js";
import type { ClientRow } from "./entities.js";
import type { IdentityRepository } from "./identity-repository.js";
import { isValidScope, parseScopeList } from "./scopes.js";
import { generateClientSecret, hashSecret, newTokenGeneration } from "./secrets.js";

export async function createClient(
  deps: ClientAdminDependencies,
  request: CreateClientRequest,
  context: HandlerContext,
): Promise<CreateClientResponse> {
  const { identity, clock, newId } = deps;
  const scopes = [...new Set(request.scopes.flatMap(parseScopeList))];
  const violations = new Violations().required("name", request.name).maxLength("name", request.name, 255);
  if (scopes.length === 0) violations.add("scopes", "must name at least one scope");
  for (const scope of scopes)
    if (!isValidScope(scope)) violations.add("scopes", `${scope} is not in the scope catalog`);
  violations.throwIfAny();
  refuseScopesBeyondCaller(context, scopes, "grant scopes you do not hold");
  const secret = generateClientSecret();
  const row: ClientRow = {
    clientId: newId(),
    providerId: providerOf(context),
    name: request.name.trim(),
    scopes: scopes.join(" "),
    secretHash: await hashSecret(secret),
    disabled: false,
    tokenGeneration: newTokenGeneration(),
    createdAt: clock.now(),
    lastUsedAt: null,
  };
  await identity.insertClient(row);
  return create(CreateClientResponseSchema, { client: toClient(row), clientSecret: secret });
}

export async function listClients(
  deps: ClientAdminDependencies,
  request: ListClientsRequest,
  context: HandlerContext,
): Promise<ListClientsResponse> {
  const { identity } = deps;
  const pageRequest = resolvePage(request.pageNumber, request.pageSize);
  const { rows, total } = await identity.listClients(providerOf(context), pageRequest.offset, pageRequest.pageSize);
  return create(ListClientsResponseSchema, {
    ...pageInfo(pageRequest, total, rows.length),
    items: rows.map(toClient),
  });
}

export async function getClient(
  deps: ClientAdminDependencies,
  request: GetClientRequest,
  context: HandlerContext,
): Promise<GetClientResponse> {
  const { identity } = deps;
  return create(GetClientResponseSchema, {
    client: toClient(await ownClient(identity, providerOf(context), request.clientId)),
  });
}

/** A new secret and a new token generation: the old secret and every token issued before stop working. */
export async function rotateClientSecret(
  deps: ClientAdminDependencies,
  request: RotateClientSecretRequest,
  context: HandlerContext,
): Promise<RotateClientSecretResponse> {
  const { identity } = deps;
  const row = await manageableClient(identity, context, request.clientId);
  const secret = generateClientSecret();
  const changes = { secretHash: await hashSecret(secret), tokenGeneration: newTokenGeneration() };
  await identity.updateClient(row.clientId, changes);
  return create(RotateClientSecretResponseSchema, {
    client: toClient({ ...row, ...changes }),
    clientSecret: secret,
  });
}

/** Disabling also replaces the token generation, so enabling again never revives a token issued before. */
export async function setClientEnabled(
  deps: ClientAdminDependencies,
  request: SetClientEnabledRequest,
  context: HandlerContext,
): Promise<SetClientEnabledResponse> {
  const { identity } = deps;
  if (request.enabled === undefined) throw invalidField("enabled", "is required: true or false");
  const row = await manageableClient(identity, context, request.clientId);
  const changes = request.enabled ? { disabled: false } : { disabled: true, tokenGeneration: newTokenGeneration() };
  await identity.updateClient(row.clientId, changes);
  return create(SetClientEnabledResponseSchema, { client: toClient({ ...row, ...changes }) });
}

export async function deleteClient(
  deps: ClientAdminDependencies,
  request: DeleteClientRequest,
  context: HandlerContext,
): Promise<DeleteClientResponse> {
  const { identity } = deps;
  await manageableClient(identity, context, request.clientId);
  if (!(await identity.deleteClient(providerOf(context), request.clientId))) {
    throw notFound("client", request.clientId);
  }
  return create(DeleteClientResponseSchema, {});
}

/** The provider's client of exactly this id (a database comparing ids loosely must not turn `id ` into `id`). */
async function ownClient(identity: IdentityRepository, providerId: string, clientId: string): Promise<ClientRow> {
  const row = await identity.findProviderClient(providerId, clientId);
  if (!row || row.clientId !== clientId) throw notFound("client", clientId);
  return row;
}

/** A client the caller may take over (rotate, disable, delete): one with no scope the caller lacks. */
async function manageableClient(
  identity: IdentityRepository,
  context: HandlerContext,
  clientId: string,
): Promise<ClientRow> {
  const row = await ownClient(identity, providerOf(context), clientId);
  refuseScopesBeyondCaller(context, parseScopeList(row.scopes), "manage a client with scopes you do not hold");
  return row;
}

export function toClient(row: ClientRow): Client {
  return create(ClientSchema, {
    clientId: row.clientId,
    providerId: row.providerId,
    name: row.name,
    scopes: parseScopeList(row.scopes),
    createdAt: timestampFromDate(row.createdAt),
    lastUsedAt: row.lastUsedAt ? timestampFromDate(row.lastUsedAt) : undefined,
    disabled: row.disabled,
  });
}
