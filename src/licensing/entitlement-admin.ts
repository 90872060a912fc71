import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "typeorm";
import { ProductStatus } from "../../gen/provision/v1/catalog_pb.js";
import {
  type ActivationPolicy,
  ActivationPolicySchema,
  ClaimBasedActivationSchema,
  type ConvertToTemplateRequest,
  type ConvertToTemplateResponse,
  ConvertToTemplateResponseSchema,
  type CreateEntitlementRequest,
  type CreateEntitlementResponse,
  CreateEntitlementResponseSchema,
  type CreateFromTemplateRequest,
  type CreateFromTemplateResponse,
  CreateFromTemplateResponseSchema,
  type Entitlement,
  type EntitlementParameters,
  EntitlementParametersSchema,
  type GetEntitlementRequest,
  type GetEntitlementResponse,
  GetEntitlementResponseSchema,
  type ListEntitlementsRequest,
  type ListEntitlementsResponse,
  ListEntitlementsResponseSchema,
  RequiredAuthenticationLevel,
  type SetActivationEnabledRequest,
  type SetActivationEnabledResponse,
  SetActivationEnabledResponseSchema,
  type SetClaimBasedSeatsRequest,
  type SetClaimBasedSeatsResponse,
  SetClaimBasedSeatsResponseSchema,
  type SetSubscriptionActiveRequest,
  type SetSubscriptionActiveResponse,
  SetSubscriptionActiveResponseSchema,
  type UpdateEntitlementRequest,
  type UpdateEntitlementResponse,
  UpdateEntitlementResponseSchema,
} from "../../gen/provision/v1/entitlement_pb.js";
import { clientPrincipalKey } from "../auth/auth-interceptor.js";
import { anyCovers } from "../auth/scopes.js";
import type { ProductRow } from "../catalog/entities.js";
import { storedDate } from "../catalog/product-mapper.js";
import { inTransaction, isUniqueViolation } from "../platform/database.js";
import { conflict, DomainError, invalidField, notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { issueActivationCode } from "./activation-code-admin.js";
import type { EntitlementRow } from "./entities.js";
import { contentsFromCatalog, copiedContents } from "./entitlement-contents.js";
import { entitlementEvents } from "./entitlement-events.js";
import { applyFeatureUpdates } from "./entitlement-features.js";
import { policyOf, policyText, withoutTrialEnd, withTrialEnd } from "./entitlement-mapper.js";
import { parseEntitlementFilter, parseEntitlementSort } from "./entitlement-query.js";
import {
  type EntitlementRepository,
  entitlementRepository,
  entitlementUniqueRuleOf,
} from "./entitlement-repository.js";
import {
  checkConvertToTemplate,
  checkCreateFromTemplate,
  checkEntitlementParameters,
  checkUpdate,
} from "./entitlement-validation.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";
import { statusAllows } from "./product-lifecycle.js";
import { recountSeatsForKind, seatKindOf } from "./seat-kind-changes.js";
import { markSubscriptionResumed } from "./subscription-renewals.js";

export async function createEntitlement(
  deps: LicensingDependencies,
  request: CreateEntitlementRequest,
  context: HandlerContext,
): Promise<CreateEntitlementResponse> {
  const parameters = request.entitlementParameters ?? create(EntitlementParametersSchema, {});
  const violations = new Violations();
  checkEntitlementParameters(violations, "", parameters);
  violations.throwIfAny();
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const events = deps.events.writes();
  const entitlement = await translateUniqueViolations(() =>
    inTransaction(deps.dataSource, async (manager) => {
      const now = deps.clock.now();
      const productIds = parameters.productIds.map((id) => id.toLowerCase());
      const products = await repository.catalogProducts(manager, providerId, productIds);
      const byId = new Map(products.map((product) => [product.id, product]));
      const missing = productIds.findIndex((id) => !byId.has(id));
      if (missing >= 0) throw invalidField(`productIds[${missing}]`, "is not a product of this provider");
      refuseUnentitled(
        productIds.map((id) => byId.get(id) as ProductRow),
        (index) => `productIds[${index}]`,
      );
      const row = newEntitlementRow(deps.newId(), providerId, parameters, now);
      const catalog = await repository.catalogChildren(manager, productIds);
      const ordered = productIds.map((id) => byId.get(id)).filter((product) => product !== undefined);
      const contents = contentsFromCatalog(ordered, catalog, { entitlementId: row.id, now, newId: deps.newId });
      await repository.insert(manager, row, contents);
      await events.append(manager, entitlementEvents(null, row, { cause: "created", productIds }, now));
      return viewOf(repository, manager, row);
    }),
  );
  events.committed();
  await deps.entitlementChanged(entitlement.id);
  return create(CreateEntitlementResponseSchema, { entitlement: await withLiveUsage(deps, context, entitlement) });
}

export async function getEntitlement(
  deps: LicensingDependencies,
  request: GetEntitlementRequest,
  context: HandlerContext,
): Promise<GetEntitlementResponse> {
  const id = requireUuid("entitlementId", request.entitlementId);
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const entitlement = await repository.read(async (manager) => {
    const row = await repository.find(manager, providerId, id);
    return row && viewOf(repository, manager, row);
  });
  if (!entitlement) throw notFound("entitlement", id);
  return create(GetEntitlementResponseSchema, { entitlement: await withLiveUsage(deps, context, entitlement) });
}

/**
 * The entitlement with its monitored assets' live usage, for a caller holding `usage:read` (whose it is to
 * show); a caller without it sees the assets' definitions.
 */
async function withLiveUsage(
  deps: LicensingDependencies,
  context: HandlerContext,
  entitlement: Entitlement,
): Promise<Entitlement> {
  const client = context.values.get(clientPrincipalKey);
  if (client && anyCovers(client.scopes, "usage:read")) await deps.liveAssetUsage?.(entitlement);
  return entitlement;
}

export async function listEntitlements(
  deps: LicensingDependencies,
  request: ListEntitlementsRequest,
  context: HandlerContext,
): Promise<ListEntitlementsResponse> {
  const page = resolvePage(request.pageNumber, request.pageSize);
  const query = {
    filter: parseEntitlementFilter(request.filter),
    sort: parseEntitlementSort(request.sortOrder),
    offset: page.offset,
    limit: page.pageSize,
  };
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const { items, total } = await repository.read(async (manager) => {
    const { rows, total } = await repository.page(providerId, query);
    return { items: await repository.views(manager, rows), total };
  });
  return create(ListEntitlementsResponseSchema, { ...pageInfo(page, total, items.length), items });
}

export async function updateEntitlement(
  deps: LicensingDependencies,
  request: UpdateEntitlementRequest,
  context: HandlerContext,
): Promise<UpdateEntitlementResponse> {
  const violations = new Violations();
  checkUpdate(violations, request);
  violations.throwIfAny();
  const entitlement = await changeEntitlement(deps, context, request.entitlementId, async (row, manager, now) => {
    applyFields(row, request);
    if (request.activationPolicy) row.activationPolicy = policyText(keptTrialEnd(request.activationPolicy, row));
    if (row.isTemplate) {
      if (row.licenseKey) throw invalidField("licenseKey", "must be empty on a template");
      row.templateName = row.name;
      row.templateVersion = row.version;
    } else {
      row.activationPolicy = policyText(withTrialEnd(policyOf(row), row.isEntitlementTrial, row.createdAt));
    }
    return applyFeatureUpdates(repositoryOf(deps), manager, row.id, request.features, now);
  });
  return create(UpdateEntitlementResponseSchema, { entitlement });
}

export async function convertToTemplate(
  deps: LicensingDependencies,
  request: ConvertToTemplateRequest,
  context: HandlerContext,
): Promise<ConvertToTemplateResponse> {
  const id = requireUuid("entitlementId", request.entitlementId);
  const violations = new Violations();
  checkConvertToTemplate(violations, request);
  violations.throwIfAny();
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const entitlement = await translateUniqueViolations(() =>
    inTransaction(deps.dataSource, async (manager) => {
      const source = await repository.find(manager, providerId, id);
      if (!source) throw notFound("entitlement", id);
      const now = deps.clock.now();
      const row: EntitlementRow = {
        ...source,
        ...noCustomer(),
        id: deps.newId(),
        name: request.templateName,
        version: request.templateVersion,
        allowLicenseActivation: true,
        isRevoked: false,
        isTemplate: true,
        templateName: request.templateName,
        templateVersion: request.templateVersion,
        activationPolicy: policyText(withoutTrialEnd(policyOf(source))),
        revision: 1,
        createdAt: now,
        updatedAt: now,
      };
      const contents = await repository.contentsOf(manager, source.id);
      await repository.insert(
        manager,
        row,
        copiedContents(contents, { entitlementId: row.id, now, newId: deps.newId }),
      );
      return viewOf(repository, manager, row);
    }),
  );
  await deps.entitlementChanged(entitlement.id);
  return create(ConvertToTemplateResponseSchema, { entitlement: await withLiveUsage(deps, context, entitlement) });
}

export async function createFromTemplate(
  deps: LicensingDependencies,
  request: CreateFromTemplateRequest,
  context: HandlerContext,
): Promise<CreateFromTemplateResponse> {
  const violations = new Violations();
  checkCreateFromTemplate(violations, request);
  violations.throwIfAny();
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const parameters = request.entitlementParameters ?? create(EntitlementParametersSchema, {});
  const workflow = request.licenseActivationWorkflowParameters;
  const events = deps.events.writes();
  const response = await translateUniqueViolations(() =>
    inTransaction(deps.dataSource, async (manager) => {
      const template = await findTemplate(repository, manager, providerId, request);
      const now = deps.clock.now();
      const row = fromTemplate(template, parameters, deps.newId(), now);
      const contents = await repository.contentsOf(manager, template.id);
      const products = await repository.catalogProducts(manager, providerId, contents.productIds);
      refuseUnentitled(products, () => "entitlementTemplateId");
      await repository.insert(
        manager,
        row,
        copiedContents(contents, { entitlementId: row.id, now, newId: deps.newId }),
      );
      const productIds = contents.productIds;
      const plan = { cause: "from-template" as const, productIds, templateId: template.id };
      await events.append(manager, entitlementEvents(null, row, plan, now));
      const activationInvitation = workflow
        ? await issueActivationCode(manager, {
            providerId,
            entitlementId: row.id,
            parameters: workflow,
            now,
            newId: deps.newId,
            fieldPrefix: "licenseActivationWorkflowParameters.",
            policyLevel: policyOf(row)?.requiredAuthenticationLevel ?? RequiredAuthenticationLevel.UNSPECIFIED,
          })
        : undefined;
      return { entitlement: await viewOf(repository, manager, row), activationInvitation };
    }),
  );
  events.committed();
  await deps.entitlementChanged(response.entitlement.id);
  await withLiveUsage(deps, context, response.entitlement);
  return create(CreateFromTemplateResponseSchema, response);
}

export async function setActivationEnabled(
  deps: LicensingDependencies,
  request: SetActivationEnabledRequest,
  context: HandlerContext,
): Promise<SetActivationEnabledResponse> {
  const enable = request.enable;
  if (enable === undefined) throw invalidField("enable", "is required: true or false");
  const entitlement = await changeEntitlement(deps, context, request.entitlementId, (row) => {
    row.allowLicenseActivation = enable;
  });
  return create(SetActivationEnabledResponseSchema, { entitlement });
}

export async function setClaimBasedSeats(
  deps: LicensingDependencies,
  request: SetClaimBasedSeatsRequest,
  context: HandlerContext,
): Promise<SetClaimBasedSeatsResponse> {
  const seats = request.numberOfSeats;
  if (seats === undefined) throw invalidField("numberOfSeats", "is required (0 means no seat limit)");
  if (seats < 0) throw invalidField("numberOfSeats", "must be 0 (no seat limit) or more");
  const entitlement = await changeEntitlement(deps, context, request.entitlementId, (row) => {
    const policy = policyOf(row) ?? create(ActivationPolicySchema, {});
    policy.claimBasedActivation ??= create(ClaimBasedActivationSchema, {});
    policy.claimBasedActivation.numberOfSeats = seats;
    if (request.isFloatingLicense !== undefined) {
      policy.claimBasedActivation.isFloatingLicense = request.isFloatingLicense;
    }
    row.activationPolicy = policyText(policy);
  });
  return create(SetClaimBasedSeatsResponseSchema, { entitlement });
}

export async function setSubscriptionActive(
  deps: LicensingDependencies,
  request: SetSubscriptionActiveRequest,
  context: HandlerContext,
): Promise<SetSubscriptionActiveResponse> {
  const active = request.isSubscriptionActive;
  if (active === undefined) throw invalidField("isSubscriptionActive", "is required: true or false");
  const entitlement = await changeEntitlement(deps, context, request.entitlementId, (row) => {
    const policy = policyOf(row);
    if (!policy?.subscriptionPolicy) {
      throw new DomainError("failed-precondition", `entitlement ${row.id} has no subscription policy`, {
        slug: "no-subscription-policy",
      });
    }
    policy.subscriptionPolicy.isSubscriptionActive = active;
    row.activationPolicy = policyText(policy);
  });
  return create(SetSubscriptionActiveResponseSchema, { entitlement });
}

function repositoryOf(deps: LicensingDependencies): EntitlementRepository {
  return entitlementRepository(deps.dataSource, deps.catalog);
}

async function viewOf(repository: EntitlementRepository, manager: EntityManager, row: EntitlementRow) {
  const [entitlement] = await repository.views(manager, [row]);
  return entitlement;
}

/**
 * Changes one of the provider's entitlements in one transaction, its row locked: `change` edits the row (and
 * answers true when it changed a feature), which is then saved with its revision incremented; `entitlementChanged`
 * follows the commit. A change that changes nothing writes nothing and announces nothing.
 */
async function changeEntitlement(
  deps: LicensingDependencies,
  context: HandlerContext,
  entitlementId: string,
  change: (row: EntitlementRow, manager: EntityManager, now: Date) => unknown,
): Promise<Entitlement> {
  const id = requireUuid("entitlementId", entitlementId);
  const providerId = providerOf(context);
  const repository = repositoryOf(deps);
  const events = deps.events.writes();
  let changed = true;
  const entitlement = await translateUniqueViolations(() =>
    inTransaction(deps.dataSource, async (manager) => {
      const row = await repository.find(manager, providerId, id, true);
      if (!row) throw notFound("entitlement", id);
      const now = deps.clock.now();
      // As it would be stored now: a policy stored before the level was always written is no change.
      row.activationPolicy = policyText(policyOf(row));
      const before = { ...row };
      const featuresChanged = (await change(row, manager, now)) === true;
      changed = featuresChanged || !sameColumns(before, row);
      if (!changed) return viewOf(repository, manager, before);
      await markSubscriptionResumed(manager, before, row, now);
      const kinds = { before: seatKindOf(before), after: seatKindOf(row) };
      await recountSeatsForKind(manager, deps.store, { entitlementId: id, ...kinds, now });
      row.updatedAt = now;
      await repository.update(manager, row);
      const view = await viewOf(repository, manager, row);
      const plan = {
        cause: "updated" as const,
        productIds: view.products.map((product) => product.id),
        featuresChanged,
      };
      await events.append(manager, entitlementEvents(before, row, plan, now));
      return view;
    }),
  );
  events.committed();
  if (changed) await deps.entitlementChanged(id);
  return withLiveUsage(deps, context, entitlement);
}

/** Whether a change left every column of the row as it was. */
function sameColumns(before: EntitlementRow, after: EntitlementRow): boolean {
  return (Object.keys(after) as (keyof EntitlementRow)[]).every((key) => {
    const [was, is] = [before[key], after[key]];
    return was instanceof Date && is instanceof Date ? was.getTime() === is.getTime() : was === is;
  });
}

function newEntitlementRow(
  id: string,
  providerId: string,
  parameters: EntitlementParameters,
  now: Date,
): EntitlementRow {
  const isTemplate = parameters.isTemplateForNewEntitlements;
  const isTrial = parameters.isTrial ?? false;
  const policy = parameters.activationPolicy;
  return {
    id,
    providerId,
    name: parameters.name,
    description: parameters.description || null,
    version: parameters.version,
    legalNoticeHtml: parameters.legalNoticeHtml || null,
    customerContactEmail: parameters.customerContactEmail,
    customerContactName: parameters.customerContactName,
    customerId: parameters.customerId.toLowerCase(),
    allowLicenseActivation: true,
    licenseKey: licenseKeyOf(parameters.licenseKey),
    expirationDateTime: parameters.expirationDateTime ? storedDate(parameters.expirationDateTime) : null,
    isEntitlementTrial: isTrial,
    isRevoked: parameters.isRevoked ?? false,
    isTemplate,
    templateName: isTemplate ? parameters.name : null,
    templateVersion: isTemplate ? parameters.version : null,
    orderId: parameters.orderId,
    reference: parameters.reference,
    activationPolicy: policyText(isTemplate ? withoutTrialEnd(policy) : withTrialEnd(policy, isTrial, now)),
    revision: 1,
    createdAt: now,
    updatedAt: now,
  };
}

/** A new entitlement from a template: the values sent override the template's; never a template itself. */
function fromTemplate(
  template: EntitlementRow,
  parameters: EntitlementParameters,
  id: string,
  now: Date,
): EntitlementRow {
  const text = (sent: string, kept: string) => (sent !== "" ? sent : kept);
  const isTrial = parameters.isTrial ?? template.isEntitlementTrial;
  const policy = parameters.activationPolicy ?? withoutTrialEnd(policyOf(template));
  return {
    ...template,
    id,
    name: text(parameters.name, template.name),
    description: parameters.description || template.description,
    version: text(parameters.version, template.version),
    legalNoticeHtml: parameters.legalNoticeHtml || template.legalNoticeHtml,
    customerContactEmail: text(parameters.customerContactEmail, template.customerContactEmail),
    customerContactName: text(parameters.customerContactName, template.customerContactName),
    customerId: text(parameters.customerId.toLowerCase(), template.customerId),
    allowLicenseActivation: true,
    licenseKey: licenseKeyOf(parameters.licenseKey),
    expirationDateTime: parameters.expirationDateTime
      ? storedDate(parameters.expirationDateTime)
      : template.expirationDateTime,
    isEntitlementTrial: isTrial,
    isRevoked: parameters.isRevoked ?? template.isRevoked,
    isTemplate: false,
    templateName: null,
    templateVersion: null,
    orderId: text(parameters.orderId, template.orderId),
    reference: text(parameters.reference, template.reference),
    activationPolicy: policyText(withTrialEnd(policy, isTrial, now)),
    revision: 1,
    createdAt: now,
    updatedAt: now,
  };
}

/** 400 for the first product whose lifecycle status takes no new entitlements (draft, suspended, end of sale, retired). */
function refuseUnentitled(products: ProductRow[], fieldOf: (index: number) => string): void {
  const index = products.findIndex((product) => !statusAllows(product.status, "entitle"));
  if (index < 0) return;
  const { productCode, status } = products[index];
  const name = ProductStatus[status].toLowerCase().replaceAll("_", " ");
  throw invalidField(fieldOf(index), `product ${productCode} is ${name}: it takes no new entitlements`);
}

async function findTemplate(
  repository: EntitlementRepository,
  manager: EntityManager,
  providerId: string,
  request: CreateFromTemplateRequest,
): Promise<EntitlementRow> {
  if (request.entitlementTemplateId !== "") {
    const id = request.entitlementTemplateId.toLowerCase();
    const row = await repository.find(manager, providerId, id);
    if (!row) throw notFound("entitlement template", id);
    if (!row.isTemplate) throw invalidField("entitlementTemplateId", "is an entitlement, not a template");
    return row;
  }
  const name = request.fromEntitlementTemplateName;
  const version = request.withEntitlementTemplateVersion;
  const row = await repository.findTemplateByName(manager, providerId, name, version);
  if (!row) throw notFound("entitlement template", version ? `${name} ${version}` : name);
  return row;
}

/** The optional fields of an update that were sent, onto `row`. */
function applyFields(row: EntitlementRow, request: UpdateEntitlementRequest): void {
  if (request.name !== undefined) row.name = request.name;
  if (request.description !== undefined) row.description = request.description || null;
  if (request.version !== undefined) row.version = request.version;
  if (request.legalNoticeHtml !== undefined) row.legalNoticeHtml = request.legalNoticeHtml || null;
  if (request.customerContactEmail !== undefined) row.customerContactEmail = request.customerContactEmail;
  if (request.customerContactName !== undefined) row.customerContactName = request.customerContactName;
  if (request.customerId !== undefined) row.customerId = request.customerId.toLowerCase();
  if (request.licenseKey !== undefined) row.licenseKey = licenseKeyOf(request.licenseKey);
  if (request.orderId !== undefined) row.orderId = request.orderId;
  if (request.reference !== undefined) row.reference = request.reference;
  if (request.isRevoked !== undefined) row.isRevoked = request.isRevoked;
  if (request.allowLicenseActivation !== undefined) row.allowLicenseActivation = request.allowLicenseActivation;
  if (request.isEntitlementTrial !== undefined) row.isEntitlementTrial = request.isEntitlementTrial;
  if (request.clearExpirationDateTime) row.expirationDateTime = null;
  else if (request.expirationDateTime) row.expirationDateTime = storedDate(request.expirationDateTime);
}

/** A replacement policy keeps the trial end the service set when it names none (trialEndsAt is the service's). */
function keptTrialEnd(next: ActivationPolicy, row: EntitlementRow): ActivationPolicy {
  const trialEndsAt = policyOf(row)?.trialActivationPolicy?.trialEndsAt;
  if (trialEndsAt && next.trialActivationPolicy && !next.trialActivationPolicy.trialEndsAt) {
    next.trialActivationPolicy.trialEndsAt = trialEndsAt;
  }
  return next;
}

function noCustomer() {
  return {
    customerContactEmail: "",
    customerContactName: "",
    customerId: "",
    licenseKey: null,
    orderId: "",
    reference: "",
  };
}

/** NULL when empty, so that the (provider, licenseKey) unique index ignores entitlements without one. */
function licenseKeyOf(text: string): string | null {
  return text.trim() === "" ? null : text;
}

/** Turns a broken unique rule into the 409 the caller can act on. */
async function translateUniqueViolations<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    switch (entitlementUniqueRuleOf(error)) {
      case "license-key":
        throw conflict("an entitlement with that licenseKey already exists", "license-key-taken");
      case "template":
        throw conflict("a template with that templateName and templateVersion already exists", "template-exists");
      default:
        throw error;
    }
  }
}
