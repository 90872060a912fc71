import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import {
  CatalogService,
  CreateProductRequestSchema,
  type CreateProductResponse,
  ListProductsRequestSchema,
  type ListProductsResponse,
} from "../../gen/provision/v1/catalog_pb.js";
import { FeedbackService, SubmitRatingRequestSchema } from "../../gen/provision/v1/feedback_pb.js";
import { ProblemDetailsSchema } from "../../gen/provision/v1/problem_pb.js";
import { withholding } from "../support/contract.js";
import { authorizationMetadata, sendAuthorization } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { activate, entitlementWithCode } from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer({ services: withholding("provision.v1.FeedbackService", "submitRating") });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** grpc-js metadata authenticating as the server's bootstrap client. */
const admin = (t: { context: { server: TestServer } }) => authorizationMetadata(t.context.server.adminAuthorization);

/** Connect interceptors authenticating as the server's bootstrap client. */
const interceptors = (t: { context: { server: TestServer } }) => [
  sendAuthorization(t.context.server.adminAuthorization),
];

test("a stock grpc-js client creates and lists products over cleartext HTTP/2", async (t) => {
  const client = grpcClient(CatalogService, `127.0.0.1:${t.context.server.port}`);
  t.teardown(() => client.close());
  const created = await client.call<CreateProductResponse>(
    "createProduct",
    create(CreateProductRequestSchema, { productCode: "GRPC-1", name: "over gRPC" }),
    admin(t),
  );
  t.is(created.product?.productCode, "GRPC-1");
  const listed = await client.call<ListProductsResponse>(
    "listProducts",
    create(ListProductsRequestSchema, { filter: "productCode=GRPC-1" }),
    admin(t),
  );
  t.is(listed.totalCount, 1);
  t.is(listed.items[0].name, "over gRPC");

  const duplicate = await t.throwsAsync<grpc.ServiceError>(
    client.call("createProduct", create(CreateProductRequestSchema, { productCode: "GRPC-1" }), admin(t)),
  );
  t.is(duplicate?.code, grpc.status.ALREADY_EXISTS);
  t.regex(duplicate?.details ?? "", /already exists/);

  // grpc-js reads grpc-message with decodeURI, which leaves an escaped ":" or "/" escaped: only what gRPC asks to
  // be percent-encoded is.
  const anonymous = await t.throwsAsync<grpc.ServiceError>(
    client.call("listProducts", create(ListProductsRequestSchema, {}), new grpc.Metadata()),
  );
  t.is(anonymous?.code, grpc.status.UNAUTHENTICATED);
  t.false(/%[0-9A-F]{2}/i.test(anonymous?.details ?? ""), anonymous?.details);
  t.regex(anonymous?.details ?? "", /: /);
  for (let attempt = 0; attempt < 2; attempt++) {
    const made = client.call(
      "createProduct",
      create(CreateProductRequestSchema, { productCode: "GRPC-É/1%" }),
      admin(t),
    );
    if (attempt === 0) await made;
    else {
      const clash = await t.throwsAsync<grpc.ServiceError>(made);
      t.true(clash?.details.includes("GRPC-É/1%"), clash?.details);
    }
  }
});

test("grpc-js sees unimplemented RPCs as UNIMPLEMENTED", async (t) => {
  const { baseUrl, port } = t.context.server;
  const { code } = await entitlementWithCode(baseUrl, {});
  const token = (await activate(baseUrl, { activationCode: code, fingerprint: "grpc-unimplemented" })).body
    .licenseToken;
  const client = grpcClient(FeedbackService, `127.0.0.1:${port}`);
  t.teardown(() => client.close());
  const error = await t.throwsAsync<grpc.ServiceError>(
    client.call(
      "submitRating",
      create(SubmitRatingRequestSchema, { rating: 5 }),
      authorizationMetadata(`Bearer ${token}`),
    ),
  );
  t.is(error?.code, grpc.status.UNIMPLEMENTED);
});

test("a Connect client creates and lists products, and reads problem details from errors", async (t) => {
  const transport = createConnectTransport({
    baseUrl: t.context.server.baseUrl,
    httpVersion: "1.1",
    interceptors: interceptors(t),
  });
  const client = createClient(CatalogService, transport);
  const created = await client.createProduct({ productCode: "CONNECT-1", productVersion: "1" });
  t.is(created.product?.productCode, "CONNECT-1");
  const listed = await client.listProducts({ filter: "productCode=CONNECT-1" });
  t.is(listed.items[0].id, created.product?.id ?? "");

  const error = await t.throwsAsync(client.createProduct({ productCode: "" }));
  const connectError = ConnectError.from(error);
  t.is(connectError.code, Code.InvalidArgument);
  const [details] = connectError.findDetails(ProblemDetailsSchema);
  t.is(details?.type, "urn:provision:problem:validation");
  t.deepEqual(
    details?.errors.map((violation) => violation.field),
    ["productCode"],
  );
});

test("gRPC over connect-node's HTTP/2 transport and gRPC-Web over HTTP/1.1 reach the same service", async (t) => {
  const grpcOverH2 = createClient(
    CatalogService,
    createGrpcTransport({ baseUrl: t.context.server.baseUrl, interceptors: interceptors(t) }),
  );
  const webOverH1 = createClient(
    CatalogService,
    createGrpcWebTransport({ baseUrl: t.context.server.baseUrl, httpVersion: "1.1", interceptors: interceptors(t) }),
  );
  const created = await grpcOverH2.createProduct({ productCode: "H2-1" });
  const listed = await webOverH1.listProducts({ filter: "productCode=H2-1" });
  t.is(listed.items[0].id, created.product?.id ?? "");
});

test("a product created over gRPC is the same resource over REST", async (t) => {
  const client = createClient(
    CatalogService,
    createGrpcTransport({ baseUrl: t.context.server.baseUrl, interceptors: interceptors(t) }),
  );
  const created = await client.createProduct({ productCode: "CROSS-1" });
  const viaRest = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}/${created.product?.id}`);
  t.is(viaRest.status, 200);
  t.is(viaRest.body.productCode, "CROSS-1");
});
