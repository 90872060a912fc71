import { create, type JsonObject } from "@bufbuild/protobuf";
import test from "ava";
import {
  FeatureSchema,
  ImportProductsRequestSchema,
  ProductSchema,
  UpdateProductRequestSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { checkJsonLimits, checkMessageLimits, requestItemCaps } from "../../src/server/request-limits.js";
import { ALL_SERVICES } from "../../src/services.js";

test("every repeated and map field reachable from a request declares provision.v1.max_items", (t) => {
  const caps = requestItemCaps(ALL_SERVICES);
  t.true(caps.length >= 20);
  t.deepEqual(
    caps.filter((cap) => cap.maxItems <= 0).map((cap) => `${cap.message}.${cap.field}`),
    [],
  );
  t.like(
    caps.find((cap) => cap.message === "provision.v1.UpdateProductRequest" && cap.field === "features"),
    { maxItems: 1000 },
  );
});

test("checkJsonLimits refuses 100k features by name and cap without looking at the elements", (t) => {
  const json = { productId: "x", features: Array.from({ length: 100_000 }, () => ({})) };
  t.deepEqual(checkJsonLimits(UpdateProductRequestSchema, json), [
    { field: "features", message: "holds 100000 items; at most 1000 are allowed" },
  ]);
  t.deepEqual(checkJsonLimits(UpdateProductRequestSchema, { features: [{}, {}] }), []);
});

test("checkJsonLimits names nested fields by JSON path, for lists, maps and proto field names", (t) => {
  const products = Array.from({ length: 4 }, () => ({}) as JsonObject);
  products[3].features = Array.from({ length: 1001 }, () => ({}));
  products[1].monitored_assets = [{ meteredUsage: { usageTiers: Array.from({ length: 51 }, () => ({})) } }];
  products[2].propertyValues = { k: { metadata: Array.from({ length: 51 }, () => ({})) } };
  t.deepEqual(
    checkJsonLimits(ImportProductsRequestSchema, { products }).map((violation) => violation.field),
    [
      "products[1].monitoredAssets[0].meteredUsage.usageTiers",
      'products[2].propertyValues["k"].metadata',
      "products[3].features",
    ],
  );
  t.deepEqual(checkJsonLimits(ImportProductsRequestSchema, { products: Array(1001).fill({}) }), [
    { field: "products", message: "holds 1001 items; at most 1000 are allowed" },
  ]);
});

test("checkJsonLimits leaves values of the wrong JSON type to the decoder", (t) => {
  t.deepEqual(checkJsonLimits(UpdateProductRequestSchema, { features: "many" }), []);
  t.deepEqual(checkJsonLimits(UpdateProductRequestSchema, [1, 2]), []);
  t.deepEqual(checkJsonLimits(UpdateProductRequestSchema, { features: [null, 3] }), []);
});

test("checkMessageLimits checks decoded messages the same way", (t) => {
  const product = create(ProductSchema, {
    features: Array.from({ length: 1001 }, () => create(FeatureSchema)),
  });
  const request = create(ImportProductsRequestSchema, { products: [create(ProductSchema), product] });
  t.deepEqual(checkMessageLimits(ImportProductsRequestSchema, request), [
    { field: "products[1].features", message: "holds 1001 items; at most 1000 are allowed" },
  ]);
  const keys = Object.fromEntries(Array.from({ length: 257 }, (_, index) => [`k${index}`, { key: "", value: "" }]));
  const update = create(UpdateProductRequestSchema, { propertyValues: keys });
  t.is(checkMessageLimits(UpdateProductRequestSchema, update)[0]?.field, "propertyValues");
  t.deepEqual(checkMessageLimits(UpdateProductRequestSchema, create(UpdateProductRequestSchema)), []);
});
