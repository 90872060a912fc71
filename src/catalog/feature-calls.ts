import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type AddFeatureRequest,
  type AddFeatureResponse,
  AddFeatureResponseSchema,
  type UpdateFeatureRequest,
  type UpdateFeatureResponse,
  UpdateFeatureResponseSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { notFound } from "../platform/errors.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { requireOwnAsset } from "./asset-rows.js";
import type { CatalogDependencies, IdsAndClock } from "./catalog-dependencies.js";
import { checkFeature, MAX_FEATURES_PER_PRODUCT } from "./catalog-validation.js";
import { changeChildren, differs, type ProductChildren, requireRoom } from "./catalog-writes.js";
import type { FeatureRow } from "./entities.js";
import { featureFields } from "./feature-plans.js";
import { toFeature } from "./product-mapper.js";

/** A new feature of the product, or a deleted one of the same featureCode brought back. */
export async function addFeature(
  deps: CatalogDependencies,
  request: AddFeatureRequest,
  context: HandlerContext,
): Promise<AddFeatureResponse> {
  const productId = requireUuid("productId", request.productId);
  const violations = new Violations();
  checkFeature(violations, "", request);
  violations.throwIfAny();
  const subject = { featureCode: request.featureCode };
  const feature = await changeChildren(deps, providerOf(context), productId, subject, async (tx, children) => {
    const { row, revived } = addedFeature(deps, request, productId, children);
    if (revived) await tx.updateFeature(row);
    else await tx.insertFeature(row);
    return { result: toFeature(row), changed: true };
  });
  return create(AddFeatureResponseSchema, { feature });
}

/** The feature's row: new, or the deleted feature of its featureCode revived (counted as no new feature). */
function addedFeature(
  { clock, newId }: IdsAndClock,
  request: AddFeatureRequest,
  productId: string,
  { features, assets }: ProductChildren,
): { row: FeatureRow; revived: boolean } {
  requireOwnAsset(assets, request.meteredAssetId);
  const fields = featureFields(request);
  const deletedWithCode = fields.featureCode
    ? features.find((candidate) => candidate.isDeleted && candidate.featureCode === fields.featureCode)
    : undefined;
  if (!deletedWithCode) requireRoom("features", features.length + 1, MAX_FEATURES_PER_PRODUCT, "features");
  const now = clock.now();
  const row: FeatureRow = {
    ...fields,
    id: deletedWithCode?.id ?? newId(),
    productId,
    isEnabled: request.isEnabled ?? true,
    version: "",
    featurePath: "",
    isDeleted: false,
    revisionNumber: deletedWithCode ? deletedWithCode.revisionNumber + 1 : 1,
    createdAt: deletedWithCode?.createdAt ?? now,
    updatedAt: now,
  };
  return { row, revived: deletedWithCode !== undefined };
}

/** The fields given changed on one of the product's features. */
export async function updateFeature(
  deps: CatalogDependencies,
  request: UpdateFeatureRequest,
  context: HandlerContext,
): Promise<UpdateFeatureResponse> {
  const productId = requireUuid("productId", request.productId);
  const featureId = requireUuid("featureId", request.featureId);
  const violations = new Violations();
  checkFeature(violations, "", request);
  violations.throwIfAny();
  const subject = { featureCode: request.featureCode };
  const feature = await changeChildren(deps, providerOf(context), productId, subject, async (tx, { features }) => {
    const current = features.find((candidate) => candidate.id === featureId && !candidate.isDeleted);
    if (!current) throw notFound("feature", featureId);
    const next = updatedFeature(current, request);
    if (!differs(next, current)) return { result: toFeature(current), changed: false };
    next.revisionNumber = current.revisionNumber + 1;
    next.updatedAt = deps.clock.now();
    await tx.updateFeature(next);
    return { result: toFeature(next), changed: true };
  });
  return create(UpdateFeatureResponseSchema, { feature });
}

function updatedFeature(current: FeatureRow, request: UpdateFeatureRequest): FeatureRow {
  const next: FeatureRow = { ...current };
  if (request.moduleName !== undefined) next.moduleName = request.moduleName;
  if (request.name !== undefined) next.name = request.name;
  if (request.description !== undefined) next.description = request.description || null;
  if (request.value !== undefined) next.value = request.value || null;
  if (request.version !== undefined) next.version = request.version;
  if (request.featurePath !== undefined) next.featurePath = request.featurePath;
  if (request.featureCode !== undefined) next.featureCode = request.featureCode.trim() || null;
  if (request.isEnabled !== undefined) next.isEnabled = request.isEnabled;
  if (request.isAvailableDuringTrialPeriod !== undefined) {
    next.isAvailableDuringTrialPeriod = request.isAvailableDuringTrialPeriod;
  }
  if (request.isAvailableDuringGracePeriod !== undefined) {
    next.isAvailableDuringGracePeriod = request.isAvailableDuringGracePeriod;
  }
  if (request.canModifyValueOnEntitlement !== undefined) {
    next.canModifyValueOnEntitlement = request.canModifyValueOnEntitlement;
  }
  return next;
}
