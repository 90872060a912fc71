import { create, type DescMessage, equals, type JsonObject, type MessageShape } from "@bufbuild/protobuf";
import test from "ava";
import {
  AddFeatureRequestSchema,
  AddMonitoredResourceRequestSchema,
  ListProductsRequestSchema,
  MetricType,
  MonitoredAssetSchema,
  ProductSchema,
  ProductStatus,
  UpdateProductRequestSchema,
  UsageTierSchema,
} from "../../gen/provision/v1/catalog_pb.js";
import { SessionEventSchema } from "../../gen/provision/v1/session_event_pb.js";
import type { FieldViolation } from "../../src/platform/errors.js";
import { decodeRequest, encodeResponse } from "../../src/server/rest/json-codec.js";

/** The decoded message, or a thrown error listing the violations. */
function decoded<T extends DescMessage>(schema: T, json: unknown): MessageShape<T> {
  const result = decodeRequest(schema, json as JsonObject);
  if ("violations" in result) throw new Error(`unexpected violations: ${JSON.stringify(result.violations)}`);
  return result.message as MessageShape<T>;
}

/** The violations, or [] when the JSON decoded. */
function violations(schema: DescMessage, json: unknown): FieldViolation[] {
  const result = decodeRequest(schema, json as JsonObject);
  return "violations" in result ? result.violations : [];
}

function fields(schema: DescMessage, json: unknown): string[] {
  return violations(schema, json).map((violation) => violation.field);
}

// decodeRequest

test("a string for a bool is a violation at that field", (t) => {
  t.deepEqual(violations(AddFeatureRequestSchema, { isAvailableDuringTrialPeriod: "true" }), [
    { field: "isAvailableDuringTrialPeriod", message: "must be true or false" },
  ]);
  t.deepEqual(violations(AddFeatureRequestSchema, { isEnabled: 1 }), [
    { field: "isEnabled", message: "must be true or false" },
  ]);
});

test("an int32 must be a whole number in range; a decimal string is accepted", (t) => {
  t.deepEqual(violations(ListProductsRequestSchema, { pageNumber: "abc", pageSize: 1.5 }), [
    { field: "pageNumber", message: "must be a whole number" },
    { field: "pageSize", message: "must be a whole number" },
  ]);
  t.deepEqual(fields(ListProductsRequestSchema, { pageNumber: 2147483648 }), ["pageNumber"]);
  t.deepEqual(fields(ListProductsRequestSchema, { pageNumber: true }), ["pageNumber"]);
  t.like(decoded(ListProductsRequestSchema, { pageNumber: "12", pageSize: -3 }), { pageNumber: 12, pageSize: -3 });
});

test("an object, array or number for a string is a violation", (t) => {
  t.deepEqual(violations(AddFeatureRequestSchema, { name: {}, value: ["x"], units: 3 }), [
    { field: "name", message: "must be a string" },
    { field: "value", message: "must be a string" },
    { field: "units", message: "must be a string" },
  ]);
});

test("a repeated field given something other than an array is a violation", (t) => {
  t.deepEqual(violations(UpdateProductRequestSchema, { features: {}, removePropertyValueKeys: "color" }), [
    { field: "features", message: "must be an array" },
    { field: "removePropertyValueKeys", message: "must be an array" },
  ]);
  t.deepEqual(fields(UpdateProductRequestSchema, { removePropertyValueKeys: ["ok", 7] }), [
    "removePropertyValueKeys[1]",
  ]);
});

test("violations deep inside messages, lists and maps name the whole path", (t) => {
  const asset = {
    metricName: "api-calls",
    meteredUsage: { usageTiers: [{ startUsage: 0 }, { startUsage: "lots", quotaUsagePolicy: 1 }] },
  };
  t.deepEqual(violations(MonitoredAssetSchema, asset), [
    { field: "meteredUsage.usageTiers[1].startUsage", message: "must be a finite number" },
  ]);
  t.deepEqual(fields(AddMonitoredResourceRequestSchema, { monitoredAsset: asset }), [
    "monitoredAsset.meteredUsage.usageTiers[1].startUsage",
  ]);
  t.deepEqual(
    fields(UpdateProductRequestSchema, {
      features: [{ featureCode: "ok" }, "not an object"],
      propertyValues: { color: { key: "color", metadata: [{ key: "source", value: false }] } },
      productInformation: [],
    }),
    ["features[1]", "propertyValues.color.metadata[0].value", "productInformation"],
  );
});

test("an int64 is accepted as a number or a decimal string, within the int64 range", (t) => {
  t.is(decoded(SessionEventSchema, { transactionId: 42 }).transactionId, 42n);
  t.is(decoded(SessionEventSchema, { transactionId: "9223372036854775807" }).transactionId, 9223372036854775807n);
  t.is(decoded(SessionEventSchema, { transactionId: "-9223372036854775808" }).transactionId, -9223372036854775808n);
  t.deepEqual(violations(SessionEventSchema, { transactionId: "9223372036854775808" }), [
    { field: "transactionId", message: "is out of the int64 range" },
  ]);
  t.deepEqual(fields(SessionEventSchema, { transactionId: "1.5" }), ["transactionId"]);
  t.deepEqual(fields(SessionEventSchema, { transactionId: 1.5 }), ["transactionId"]);
  t.deepEqual(fields(SessionEventSchema, { transactionId: "0x10" }), ["transactionId"]);
});

test("a Duration is accepted as a .NET TimeSpan, an ISO 8601 duration or protobuf seconds", (t) => {
  const tolerance = (text: string) => {
    const span = decoded(MonitoredAssetSchema, { allowedBackDatingTolerance: text }).allowedBackDatingTolerance;
    return { seconds: span?.seconds, nanos: span?.nanos };
  };
  for (const text of ["01:00:00", "PT1H", "3600s", "PT60M", "0.01:00:00"]) {
    t.deepEqual(tolerance(text), { seconds: 3600n, nanos: 0 }, text);
  }
  t.deepEqual(tolerance("1.02:03:04.5"), { seconds: 93784n, nanos: 500_000_000 });
  t.deepEqual(tolerance("P1DT2H3M4.5S"), { seconds: 93784n, nanos: 500_000_000 });
  t.deepEqual(tolerance("-00:00:01.5"), { seconds: -1n, nanos: -500_000_000 });
  t.deepEqual(tolerance("-0.25s"), { seconds: 0n, nanos: -250_000_000 });
});

test("a Duration that is not one of the three forms is a violation at its field", (t) => {
  for (const value of ["P1M", "an hour", "3600", "25:00:00:00", 3600, {}]) {
    t.deepEqual(fields(MonitoredAssetSchema, { allowedBackDatingTolerance: value }), ["allowedBackDatingTolerance"]);
  }
});

test("a timestamp must be an RFC 3339 date-time with an offset", (t) => {
  for (const value of [
    "2026-01-01",
    "2026-01-01T10:00:00",
    "yesterday",
    "2026-13-01T00:00:00Z",
    "2026-01-32T00:00:00Z",
    "2026-01-01T10:60:00Z",
    "2026-01-01T10:00:00+25:00",
    "2026-01-01T10:00:00+0200",
    1767225600,
    {},
  ]) {
    t.deepEqual(fields(ProductSchema, { expirationDate: value }), ["expirationDate"], JSON.stringify(value));
  }
});

test("a timestamp's offset is applied; a space or lowercase t and z are accepted", (t) => {
  const seconds = (text: string) => decoded(ProductSchema, { expirationDate: text }).expirationDate?.seconds;
  const tenUtc = BigInt(Date.parse("2026-01-01T10:00:00Z") / 1000);
  t.is(seconds("2026-01-01T10:00:00Z"), tenUtc);
  t.is(seconds("2026-01-01T12:00:00+02:00"), tenUtc);
  t.is(seconds("2026-01-01 10:00:00Z"), tenUtc);
  t.is(seconds("2026-01-01t10:00:00z"), tenUtc);
  t.is(decoded(ProductSchema, { expirationDate: "2026-01-01T10:00:00.25Z" }).expirationDate?.nanos, 250_000_000);
});

test("a timestamp naming a day or an hour that does not exist is refused, not rolled over", (t) => {
  for (const value of ["2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z"]) {
    t.deepEqual(fields(ProductSchema, { expirationDate: value }), ["expirationDate"], value);
  }
});

test("a timestamp outside years 0001 to 9999 is a violation at its field", (t) => {
  t.deepEqual(fields(ProductSchema, { expirationDate: "0000-12-31T23:59:59Z" }), ["expirationDate"]);
  t.deepEqual(fields(UpdateProductRequestSchema, { features: [{ creationTimeStamp: "0000-06-01T00:00:00Z" }] }), [
    "features[0].creationTimeStamp",
  ]);
});

test("an enum is an integer (or its decimal string); an unknown name is refused at its field", (t) => {
  t.is(decoded(ProductSchema, { status: 2 }).status, ProductStatus.ACTIVE);
  t.is(decoded(ProductSchema, { status: "4" }).status, ProductStatus.SUSPENDED);
  t.is(
    decoded(ProductSchema, { status: "PRODUCT_STATUS_RETIRED" }).status,
    ProductStatus.RETIRED,
    "protobuf JSON name",
  );
  t.deepEqual(fields(ProductSchema, { status: 1.5 }), ["status"]);
  t.deepEqual(fields(ProductSchema, { status: true }), ["status"]);
  t.deepEqual(fields(MonitoredAssetSchema, { metricType: "METERED_TYPO" }), ["metricType"]);
});

test("unknown fields and nulls are ignored; proto field names work as well as JSON names", (t) => {
  const request = decoded(UpdateProductRequestSchema, {
    ...JSON.parse('{"__proto__": {"polluted": true}}'),
    product_id: "p-1",
    name: null,
    features: null,
    expirationDate: null,
    productInformation: { supportUrl: "https://example.test", bogus: { deep: [1] }, downloadUrl: null },
    propertyValues: { color: { key: "color", value: "blue", metadata: null } },
    notAField: "ignored",
  });
  t.is(request.productId, "p-1");
  t.is(request.name, undefined, "an optional sent as null stays unset");
  t.deepEqual(request.features, []);
  t.is(request.expirationDate, undefined);
  t.is(request.productInformation?.supportUrl, "https://example.test");
  t.is(request.productInformation?.downloadUrl, "");
  t.deepEqual(request.propertyValues.color.metadata, []);
  t.is(({} as Record<string, unknown>).polluted, undefined);
});

// encodeResponse

const PRODUCT_KEYS = ProductSchema.fields.map((field) => field.jsonName).sort();

test("every field is emitted: unset messages and optionals as null, lists as [], maps as {}", (t) => {
  const json = encodeResponse(ProductSchema, create(ProductSchema, {})) as JsonObject;
  t.deepEqual(Object.keys(json).sort(), PRODUCT_KEYS);
  t.like(json, {
    id: "",
    status: 0,
    expirationDate: null,
    productInformation: null,
    createdAt: null,
    features: [],
    monitoredAssets: [],
    propertyValues: {},
    isDeleted: false,
    revisionNumber: 0,
  });

  const request = encodeResponse(UpdateProductRequestSchema, create(UpdateProductRequestSchema, {})) as JsonObject;
  t.like(request, { name: null, productCode: null, externalId: null, clearExpirationDate: false });
});

test("nested messages in lists and maps are completed too", (t) => {
  const product = create(ProductSchema, {
    features: [{ featureCode: "export" }],
    propertyValues: { color: { key: "color" } },
    monitoredAssets: [{ metricName: "calls", meteredUsage: { usageTiers: [{ name: "base" }] } }],
  });
  const json = encodeResponse(ProductSchema, product) as any;
  t.like(json.features[0], {
    featureCode: "export",
    creationTimeStamp: null,
    lastUpdateTimeStamp: null,
    isEnabled: null,
    isAvailableDuringTrialPeriod: false,
  });
  t.deepEqual(json.propertyValues.color, { key: "color", value: "", metadata: [] });
  t.like(json.monitoredAssets[0], { balanceUsage: null, allowedBackDatingTolerance: null });
  t.like(json.monitoredAssets[0].meteredUsage, { suspendUntilTimeStamp: null, consumptionPeriod: "" });
  t.like(json.monitoredAssets[0].meteredUsage.usageTiers[0], { name: "base", startUsage: 0, quotaUsagePolicy: 0 });
});

test("enums are written as integers", (t) => {
  const json = encodeResponse(
    ProductSchema,
    create(ProductSchema, { status: ProductStatus.RETIRED, monitoredAssets: [{ metricType: MetricType.BALANCE }] }),
  ) as any;
  t.is(json.status, 7);
  t.is(json.monitoredAssets[0].metricType, 2);
});

test("a Duration is written as a .NET TimeSpan", (t) => {
  const timeSpan = (seconds: bigint, nanos = 0) =>
    (
      encodeResponse(
        MonitoredAssetSchema,
        create(MonitoredAssetSchema, { allowedBackDatingTolerance: { seconds, nanos } }),
      ) as JsonObject
    ).allowedBackDatingTolerance;
  t.is(timeSpan(90061n, 500_000_000), "1.01:01:01.5000000");
  t.is(timeSpan(3600n), "01:00:00");
  t.is(timeSpan(0n), "00:00:00");
  t.is(timeSpan(0n, -500_000_000), "-00:00:00.5000000");
  t.is(timeSpan(-86_400n), "-1.00:00:00");
  t.is(timeSpan(1n, 1_000_000), "00:00:01.0010000");

  const inList = encodeResponse(
    ProductSchema,
    create(ProductSchema, { monitoredAssets: [{ allowedBackDatingTolerance: { seconds: 60n } }] }),
  ) as any;
  t.is(inList.monitoredAssets[0].allowedBackDatingTolerance, "00:01:00");
});

test("timestamps are written in UTC and int64 as a decimal string", (t) => {
  const product = encodeResponse(
    ProductSchema,
    create(ProductSchema, { createdAt: { seconds: BigInt(Date.parse("2026-03-01T08:00:00Z") / 1000), nanos: 0 } }),
  ) as JsonObject;
  t.is(product.createdAt, "2026-03-01T08:00:00Z");
  const event = encodeResponse(SessionEventSchema, create(SessionEventSchema, { transactionId: 9007199254740993n }));
  t.is((event as JsonObject).transactionId, "9007199254740993");
});

test("what encodeResponse writes, decodeRequest reads back unchanged", (t) => {
  const asset = create(MonitoredAssetSchema, {
    metricName: "api-calls",
    metricType: MetricType.METERED,
    allowedBackDatingTolerance: { seconds: 93784n, nanos: 500_000_000 },
    meteredUsage: {
      suspendUntilTimeStamp: { seconds: 1_780_000_000n, nanos: 0 },
      usageTiers: [{ name: "overage", startUsage: 1000, baseCredits: 12.5, quotaUsagePolicy: 2 }],
    },
  });
  const json = JSON.parse(JSON.stringify(encodeResponse(MonitoredAssetSchema, asset)));
  t.true(equals(MonitoredAssetSchema, decoded(MonitoredAssetSchema, json), asset));
});

test("a double must be a finite number: protobuf's NaN and Infinity are refused", (t) => {
  for (const value of ["NaN", "Infinity", "-Infinity"]) {
    t.deepEqual(violations(UsageTierSchema, { endUsage: value }), [
      { field: "endUsage", message: "must be a finite number" },
    ]);
  }
  t.is(decoded(UsageTierSchema, { endUsage: "12.5" }).endUsage, 12.5);
});
