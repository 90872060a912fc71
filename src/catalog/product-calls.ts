import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type CreateProductRequest,
  type CreateProductResponse,
  CreateProductResponseSchema,
  type GetProductRequest,
  type GetProductResponse,
  GetProductResponseSchema,
  type ListProductsRequest,
  type ListProductsResponse,
  ListProductsResponseSchema,
  type Product,
  ProductStatus,
  type UpdateProductRequest,
  type UpdateProductResponse,
  UpdateProductResponseSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { notFound } from "../platform/errors.js";
import { pageInfo, resolvePage } from "../platform/paging.js";
import { requireUuid, Violations } from "../platform/validation.js";
import { providerOf } from "../server/tenant.js";
import type { CatalogDependencies } from "./catalog-dependencies.js";
import { noWrites } from "./catalog-repository.js";
import { checkFeature, checkProductFields, checkPropertyValuesSize } from "./catalog-validation.js";
import { differs, lockedProduct, saveRevision, translateUniqueViolations, wantedIds } from "./catalog-writes.js";
import type { ProductRow } from "./entities.js";
import { planFeatures } from "./feature-plans.js";
import {
  parsePropertyValues,
  productInformationText,
  propertyValuesText,
  storedDate,
  toProduct,
} from "./product-mapper.js";
import { parseProductFilter, parseProductSort } from "./product-query.js";

const productResponses = new WeakMap<Product, GetProductResponse>();

/**
 * GetProduct's answer. For a cached product (deep-frozen, shared) it is one frozen answer for as long as the
 * product is cached, so the protocols can write it once (a frozen message's encoding is kept) and send the same
 * bytes again.
 */
function productResponse(product: Product): GetProductResponse {
  if (!Object.isFrozen(product)) return create(GetProductResponseSchema, { product });
  let response = productResponses.get(product);
  if (!response) {
    response = Object.freeze(create(GetProductResponseSchema, { product }));
    productResponses.set(product, response);
  }
  return response;
}

export async function listProducts(
  deps: CatalogDependencies,
  request: ListProductsRequest,
  context: HandlerContext,
): Promise<ListProductsResponse> {
  const { repository } = deps;
  const pageRequest = resolvePage(request.pageNumber, request.pageSize);
  const { rows, total } = await repository.listProducts(providerOf(context), {
    filter: parseProductFilter(request.filter),
    sort: parseProductSort(request.sortOrder),
    offset: pageRequest.offset,
    limit: pageRequest.pageSize,
  });
  const children = await repository.loadChildren(rows.map((row) => row.id));
  return create(ListProductsResponseSchema, {
    ...pageInfo(pageRequest, total, rows.length),
    items: rows.map((row) => toProduct(row, children.features(row.id), children.assets(row.id))),
  });
}

export async function getProduct(
  deps: CatalogDependencies,
  request: GetProductRequest,
  context: HandlerContext,
): Promise<GetProductResponse> {
  const { repository, products } = deps;
  const productId = requireUuid("productId", request.productId);
  const providerId = providerOf(context);
  const product = await products.get(providerId, productId, async () => {
    const tree = await repository.findProductTree(providerId, productId);
    return tree && toProduct(tree.product, tree.features, tree.assets);
  });
  if (!product) throw notFound("product", productId);
  return productResponse(product);
}

export async function createProduct(
  deps: CatalogDependencies,
  request: CreateProductRequest,
  context: HandlerContext,
): Promise<CreateProductResponse> {
  const { repository, clock, newId } = deps;
  const violations = new Violations().required("productCode", request.productCode);
  checkProductFields(violations, "", request);
  violations.throwIfAny();
  const now = clock.now();
  const row: ProductRow = {
    id: newId(),
    providerId: providerOf(context),
    status: ProductStatus.ACTIVE,
    name: request.name,
    description: request.description || null,
    productCode: request.productCode.trim(),
    productVersion: request.productVersion.trim(),
    expirationDate: null,
    externalId: request.externalId,
    productInformation: null,
    propertyValues: null,
    isDeleted: false,
    isLocked: false,
    productMetaData: null,
    productLicenseData: null,
    revisionNumber: 1,
    createdAt: now,
    updatedAt: now,
  };
  await translateUniqueViolations(() => repository.insertProduct(row), { productCode: row.productCode });
  return create(CreateProductResponseSchema, { product: toProduct(row, [], []) });
}

export async function updateProduct(
  deps: CatalogDependencies,
  request: UpdateProductRequest,
  context: HandlerContext,
): Promise<UpdateProductResponse> {
  const { repository, products, clock } = deps;
  const productId = requireUuid("productId", request.productId);
  const violations = new Violations();
  if (request.productCode !== undefined) violations.required("productCode", request.productCode);
  checkProductFields(violations, "", request);
  for (const [index, feature] of request.features.entries()) {
    checkFeature(violations, `features[${index}].`, feature);
    violations.uuid(`features[${index}].id`, feature.id);
  }
  violations.throwIfAny();
  const providerId = providerOf(context);
  const product = await translateUniqueViolations(
    () =>
      repository.transaction(async (tx) => {
        const row = await lockedProduct(tx, providerId, productId);
        const changed = { ...row };
        if (request.name !== undefined) changed.name = request.name;
        if (request.productCode !== undefined) changed.productCode = request.productCode.trim();
        if (request.description !== undefined) changed.description = request.description || null;
        if (request.productVersion !== undefined) changed.productVersion = request.productVersion.trim();
        if (request.externalId !== undefined) changed.externalId = request.externalId;
        if (request.productMetaData !== undefined) changed.productMetaData = request.productMetaData || null;
        if (request.productLicenseData !== undefined) changed.productLicenseData = request.productLicenseData || null;
        if (request.productInformation) changed.productInformation = productInformationText(request.productInformation);
        if (request.clearExpirationDate) changed.expirationDate = null;
        else if (request.expirationDate) changed.expirationDate = storedDate(request.expirationDate);
        const properties = { ...parsePropertyValues(row.propertyValues), ...request.propertyValues };
        for (const key of request.removePropertyValueKeys) delete properties[key];
        changed.propertyValues = propertyValuesText(properties);
        const merged = new Violations();
        checkPropertyValuesSize(merged, "propertyValues", changed.propertyValues);
        merged.throwIfAny();

        const { features, assets } = await tx.children(productId);
        const writes = noWrites();
        const after = planFeatures(deps, row.id, features, assets, request.features, writes, {
          field: "features",
          unknownId: "reject",
          taken: await tx.takenFeatureIds(wantedIds(request.features)),
        });
        await tx.apply(writes);
        const featuresChanged = writes.insertFeatures.length + writes.updateFeatures.length > 0;
        const rowChanged = differs(changed, row);
        if (rowChanged || featuresChanged) await saveRevision(clock, tx, changed);
        return toProduct(rowChanged || featuresChanged ? changed : row, after, assets);
      }),
    { productCode: request.productCode },
  );
  await products.changed(providerId, [productId]);
  return create(UpdateProductResponseSchema, { product });
}
