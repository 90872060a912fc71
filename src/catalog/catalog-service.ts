import type { ServiceImpl } from "@connectrpc/connect";
import type { CatalogService } from "../../gen/provision/v1/catalog_pb.js";
import * as assets from "./asset-calls.js";
import type { CatalogDependencies } from "./catalog-dependencies.js";
import * as features from "./feature-calls.js";
import * as products from "./product-calls.js";
import { importProducts } from "./product-import.js";

/** CatalogService: each RPC handed to its named function. */
export function createCatalogService(deps: CatalogDependencies): ServiceImpl<typeof CatalogService> {
  return {
    listProducts: (request, context) => products.listProducts(deps, request, context),
    getProduct: (request, context) => products.getProduct(deps, request, context),
    createProduct: (request, context) => products.createProduct(deps, request, context),
    updateProduct: (request, context) => products.updateProduct(deps, request, context),
    importProducts: (request, context) => importProducts(deps, request, context),
    addFeature: (request, context) => features.addFeature(deps, request, context),
    updateFeature: (request, context) => features.updateFeature(deps, request, context),
    addMonitoredResource: (request, context) => assets.addMonitoredResource(deps, request, context),
    updateMonitoredResource: (request, context) => assets.updateMonitoredResource(deps, request, context),
  };
}
