import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "typeorm";
import {
  type ActivationInvitation,
  type ActivationInvitationParameters,
  ActivationInvitationParametersSchema,
  type CreateActivationCodeRequest,
  type CreateActivationCodeResponse,
  CreateActivationCodeResponseSchema,
  type DeleteActivationCodeRequest,
  type DeleteActivationCodeResponse,
  DeleteActivationCodeResponseSchema,
  type ListActivationCodesRequest,
  type ListActivationCodesResponse,
  ListActivationCodesResponseSchema,
  type RequiredAuthenticationLevel,
} from "../../gen/provision/v1/entitlement_pb.js";
import { storedDate } from "../catalog/product-mapper.js";
import { inTransaction, isUniqueViolation, readSerially } from "../platform/database.js";
import { conflict, DomainError, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { codeKey, generateActivationCode } from "./activation-code-format.js";
import { preAuthorizedDevicesText, toActivationInvitation } from "./activation-code-mapper.js";
import {
  findActivationCode,
  findEntitlementKind,
  insertActivationCode,
  listActivationCodeRows,
  loadCodeDevices,
  markActivationCodeDeleted,
} from "./activation-code-store.js";
import { checkInvitationParameters } from "./activation-code-validation.js";
import type { ActivationCodeRow } from "./entities.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";

/** Generated codes tried before giving up: with 100 bits, a second one is already never needed in practice. */
const GENERATION_ATTEMPTS = 3;

export interface IssueActivationCodeInput {
  providerId: string;
  entitlementId: string;
  parameters: ActivationInvitationParameters;
  now: Date;
  /** Id of the new code; a random UUID by default. */
  newId?: () => string;
  /** Put before the field names of validation errors (`licenseActivationWorkflowParameters.`). */
  fieldPrefix?: string;
  /** The entitlement policy's requiredAuthenticationLevel: the stricter of it and the code's applies. */
  policyLevel: RequiredAuthenticationLevel;
}

/**
 * Validates an invitation and inserts its code, within the caller's transaction (`manager` only). The code is
 * the vendor's (409 `activation-code-taken` when its key exists, for any provider) or generated.
 */
export async function issueActivationCode(
  manager: EntityManager,
  input: IssueActivationCodeInput,
): Promise<ActivationInvitation> {
  const { parameters, now } = input;
  const violations = new Violations();
  checkInvitationParameters(violations, input.fieldPrefix ?? "", parameters, now, input.policyLevel);
  violations.throwIfAny();
  const chosen = parameters.activationCode.trim();
  const row = newCodeRow(input, chosen || generateActivationCode());
  for (let attempt = 1; ; attempt++) {
    try {
      await insertActivationCode(manager, row);
      return toActivationInvitation(row, []);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      if (chosen || attempt >= GENERATION_ATTEMPTS) throw codeTaken();
      row.code = generateActivationCode();
      row.codeKey = codeKey(row.code);
    }
  }
}

function codeTaken(): DomainError {
  return conflict("the activation code is already taken; choose another", "activation-code-taken");
}

function newCodeRow(input: IssueActivationCodeInput, code: string): ActivationCodeRow {
  const { parameters } = input;
  const devices = [...new Set(parameters.preAuthorizedDevices)];
  return {
    id: (input.newId ?? randomUUID)(),
    providerId: input.providerId,
    entitlementId: input.entitlementId,
    code,
    codeKey: codeKey(code),
    requiredAuthenticationLevel: parameters.requiredAuthenticationLevel,
    email: parameters.email,
    userId: parameters.userId.toLowerCase(),
    organizationGroupId: parameters.organizationGroupId.toLowerCase(),
    fingerprint: parameters.fingerprint,
    preAuthorizedDevices: preAuthorizedDevicesText(devices),
    // Left at 0, a code's limit is its pre-authorized devices (each of them may activate), or else one device.
    maxDeviceActivations: parameters.maxDeviceActivations || devices.length,
    activationCodeUseCount: 0,
    maxActivationCodeUseCount: parameters.maxActivationCodeUseCount,
    verificationCodeUseCount: 0,
    maxVerificationCodeUseCount: 0,
    userConsent: false,
    requiresUserConsent: parameters.requiresUserConsent,
    sendUserNotification: parameters.sendUserNotification,
    isTrialActivation: parameters.isTrialActivation,
    useEntitlementMaxActivations: parameters.useEntitlementMaxActivations,
    isDeleted: false,
    activationTimeStamp: null,
    expirationTimeStamp: parameters.expirationTimeStamp ? storedDate(parameters.expirationTimeStamp) : null,
    createdAt: input.now,
  };
}

/** Issues a code for one of the provider's entitlements; a template answers 409 `template-not-activatable`. */
export async function createActivationCode(
  deps: LicensingDependencies,
  request: CreateActivationCodeRequest,
  context: HandlerContext,
): Promise<CreateActivationCodeResponse> {
  const entitlementId = requireUuid("entitlementId", request.entitlementId);
  const providerId = providerOf(context);
  const parameters = request.activationInvitationParameters ?? create(ActivationInvitationParametersSchema);
  const invitation = await inTransaction(deps.dataSource, async (manager) => {
    const entitlement = await findEntitlementKind(manager, providerId, entitlementId);
    if (!entitlement) throw notFound("entitlement", entitlementId);
    if (entitlement.isTemplate) {
      throw new DomainError("failed-precondition", "a template cannot have activation codes", {
        slug: "template-not-activatable",
      });
    }
    return issueActivationCode(manager, {
      providerId,
      entitlementId,
      parameters,
      now: deps.clock.now(),
      newId: deps.newId,
      policyLevel: entitlement.policyLevel,
    });
  });
  return create(CreateActivationCodeResponseSchema, { activationInvitation: invitation });
}

/** A page of an entitlement's codes, newest first, deleted ones included (isDeleted). */
export async function listActivationCodes(
  deps: LicensingDependencies,
  request: ListActivationCodesRequest,
  context: HandlerContext,
): Promise<ListActivationCodesResponse> {
  const entitlementId = requireUuid("entitlementId", request.entitlementId);
  const page = resolvePage(request.pageNumber, request.pageSize);
  const scope = { providerId: providerOf(context), entitlementId };
  return readSerially(deps.dataSource, async () => {
    const manager = deps.dataSource.manager;
    if (!(await findEntitlementKind(manager, scope.providerId, entitlementId))) {
      throw notFound("entitlement", entitlementId);
    }
    const { rows, total } = await listActivationCodeRows(manager, scope, { offset: page.offset, limit: page.pageSize });
    const devices = await loadCodeDevices(
      manager,
      rows.map((row) => row.id),
    );
    return create(ListActivationCodesResponseSchema, {
      ...pageInfo(page, total, rows.length),
      items: rows.map((row) => toActivationInvitation(row, devices.get(row.id) ?? [])),
    });
  });
}

/** Soft-deletes a code: it activates no more. Deleting a deleted code answers the same success. */
export async function deleteActivationCode(
  deps: LicensingDependencies,
  request: DeleteActivationCodeRequest,
  context: HandlerContext,
): Promise<DeleteActivationCodeResponse> {
  const entitlementId = requireUuid("entitlementId", request.entitlementId);
  const codeId = requireUuid("activationCodeId", request.activationCodeId);
  const scope = { providerId: providerOf(context), entitlementId };
  // No cached standing holds a code, so nothing is invalidated: activation reads the code in its transaction.
  await inTransaction(deps.dataSource, async (manager) => {
    const code = await findActivationCode(manager, scope, codeId);
    if (!code) throw notFound("activation code", codeId);
    if (!code.isDeleted) await markActivationCodeDeleted(manager, codeId);
  });
  return create(DeleteActivationCodeResponseSchema);
}
