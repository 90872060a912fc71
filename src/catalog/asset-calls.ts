import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type AddMonitoredResourceRequest,
  type AddMonitoredResourceResponse,
  AddMonitoredResourceResponseSchema,
  type UpdateMonitoredResourceRequest,
  type UpdateMonitoredResourceResponse,
  UpdateMonitoredResourceResponseSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { notFound } from "../platform/errors.js";
import { requireUuid } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import { assetRow, requireAsset } from "./asset-rows.js";
import type { CatalogDependencies } from "./catalog-dependencies.js";
import { MAX_ASSETS_PER_PRODUCT } from "./catalog-validation.js";
import { changeChildren, differs, requireRoom } from "./catalog-writes.js";
import { toMonitoredAsset } from "./product-mapper.js";

/** A new monitored asset of the product. */
export async function addMonitoredResource(
  deps: CatalogDependencies,
  request: AddMonitoredResourceRequest,
  context: HandlerContext,
): Promise<AddMonitoredResourceResponse> {
  const productId = requireUuid("productId", request.productId);
  const asset = requireAsset(request.monitoredAsset);
  const subject = { metricName: asset.metricName };
  const stored = await changeChildren(deps, providerOf(context), productId, subject, async (tx, { assets }) => {
    requireRoom("monitoredAsset", assets.length + 1, MAX_ASSETS_PER_PRODUCT, "monitored assets");
    const row = assetRow(deps, asset, productId);
    await tx.insertAsset(row);
    return { result: toMonitoredAsset(row), changed: true };
  });
  return create(AddMonitoredResourceResponseSchema, { monitoredAsset: stored });
}

/** One of the product's monitored assets (by id, else by metricName) replaced by the one given. */
export async function updateMonitoredResource(
  deps: CatalogDependencies,
  request: UpdateMonitoredResourceRequest,
  context: HandlerContext,
): Promise<UpdateMonitoredResourceResponse> {
  const productId = requireUuid("productId", request.productId);
  const asset = requireAsset(request.monitoredAsset);
  const subject = { metricName: asset.metricName };
  const stored = await changeChildren(deps, providerOf(context), productId, subject, async (tx, { assets }) => {
    const current = asset.id
      ? assets.find((candidate) => candidate.id === asset.id.toLowerCase())
      : assets.find((candidate) => candidate.metricName === asset.metricName.trim());
    if (!current) throw notFound("monitored asset", asset.id || asset.metricName);
    const row = assetRow(deps, asset, productId, current);
    if (!differs({ ...row, updatedAt: current.updatedAt }, current)) {
      return { result: toMonitoredAsset(current), changed: false };
    }
    await tx.updateAsset(row);
    return { result: toMonitoredAsset(row), changed: true };
  });
  return create(UpdateMonitoredResourceResponseSchema, { monitoredAsset: stored });
}
