import anyTest, { type TestFn } from "ava";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { accessToken, requestToken } from "../support/auth.js";
import { CLIENTS } from "../support/oauth-clients.js";
import { createProviderWithClient, type ProviderClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

interface Context {
  server: TestServer;
  /** A second provider, with a client holding every scope. */
  other: ProviderClient & { authorization: string };
  /** A product of the default provider, with one feature and one monitored asset. */
  product: { id: string; featureId: string; revisionNumber: number };
}

const test = anyTest as TestFn<Context>;

const SECRET_NAME = "Alpha confidential product";

test.before(async (t) => {
  const server = await startTestServer();
  t.context.server = server;
  const other = await createProviderWithClient(server);
  t.context.other = {
    ...other,
    authorization: `Bearer ${await accessToken(server.baseUrl, other.clientId, other.clientSecret)}`,
  };
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "TENANT-A", name: SECRET_NAME });
  const feature = await rest(server.baseUrl, "POST", `${PRODUCTS}/${created.body.id}/features`, {
    featureCode: "alpha-feature",
  });
  await rest(server.baseUrl, "POST", `${PRODUCTS}/${created.body.id}/monitored-resources`, {
    metricName: "alpha-metric",
  });
  const product = await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
  if (product.status !== 200 || feature.status !== 200) throw new Error(`setup failed: ${JSON.stringify(product)}`);
  t.context.product = { id: product.body.id, featureId: feature.body.id, revisionNumber: product.body.revisionNumber };
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

test("the other provider's token is a real token of the other provider", async (t) => {
  const { server, other } = t.context;
  const listed = await rest(server.baseUrl, "GET", CLIENTS, undefined, { authorization: other.authorization });
  t.is(listed.status, 200);
  t.true(listed.body.items.some((client: { clientId: string }) => client.clientId === other.clientId));
  t.true(listed.body.items.every((client: { providerId: string }) => client.providerId === other.providerId));
});

test("every catalog route on another provider's product answers 404 and never the data", async (t) => {
  const { server, other, product } = t.context;
  const base = `${PRODUCTS}/${product.id}`;
  const calls: [string, string, unknown?][] = [
    ["GET", base],
    ["PUT", base, { name: "hijacked" }],
    ["POST", `${base}/features`, { featureCode: "intruder" }],
    ["PUT", `${base}/features/${product.featureId}`, { name: "hijacked" }],
    ["POST", `${base}/monitored-resources`, { metricName: "intruder" }],
    ["PUT", `${base}/monitored-resources`, { metricName: "alpha-metric", name: "hijacked" }],
  ];
  for (const [method, path, body] of calls) {
    const response = await rest(server.baseUrl, method, path, body, { authorization: other.authorization });
    t.is(response.status, 404, `${method} ${path}: ${JSON.stringify(response.body)}`);
    t.is(response.body.type, "urn:provision:problem:not-found");
    t.false(JSON.stringify(response.body).includes(SECRET_NAME), `${method} ${path} leaks the product`);
    t.false(JSON.stringify(response.body).includes("TENANT-A"), `${method} ${path} leaks the product code`);
  }

  const after = await rest(server.baseUrl, "GET", base);
  t.like(after.body, { name: SECRET_NAME, revisionNumber: product.revisionNumber });
  t.deepEqual(
    after.body.features.map((feature: { featureCode: string; name: string }) => [feature.featureCode, feature.name]),
    [["alpha-feature", ""]],
  );
  t.deepEqual(
    after.body.monitoredAssets.map((asset: { metricName: string; name: string }) => [asset.metricName, asset.name]),
    [["alpha-metric", ""]],
  );
});

test("listing shows none of another provider's products", async (t) => {
  const { server, other } = t.context;
  const { authorization } = other;
  const all = await rest(server.baseUrl, "GET", `${PRODUCTS}?pageSize=100`, undefined, { authorization });
  t.is(all.status, 200);
  t.false(all.body.items.some((item: { productCode: string }) => item.productCode === "TENANT-A"));
  t.false(JSON.stringify(all.body).includes(SECRET_NAME));
  const filtered = await rest(server.baseUrl, "GET", `${PRODUCTS}?filter=productCode=TENANT-A`, undefined, {
    authorization,
  });
  t.is(filtered.body.totalCount, 0);
  t.deepEqual(filtered.body.items, []);
});

test("the same productCode can be created in two providers, and stays unique within each", async (t) => {
  const { server, other } = t.context;
  const { authorization } = other;
  const mine = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "SHARED-CODE", name: "mine" });
  const theirs = await rest(
    server.baseUrl,
    "POST",
    PRODUCTS,
    { productCode: "SHARED-CODE", name: "theirs" },
    {
      authorization,
    },
  );
  t.is(mine.status, 200);
  t.is(theirs.status, 200, JSON.stringify(theirs.body));
  t.not(theirs.body.id, mine.body.id);
  t.is(theirs.body.providerId, other.providerId);
  t.is(mine.body.providerId, DEFAULT_PROVIDER_ID);

  const again = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "SHARED-CODE" }, { authorization });
  t.is(again.status, 409);

  const filter = `${PRODUCTS}?filter=productCode=SHARED-CODE`;
  const ours = await rest(server.baseUrl, "GET", filter);
  const others = await rest(server.baseUrl, "GET", filter, undefined, { authorization });
  t.deepEqual(
    ours.body.items.map((item: { name: string }) => item.name),
    ["mine"],
  );
  t.deepEqual(
    others.body.items.map((item: { name: string }) => item.name),
    ["theirs"],
  );
});

test("an import naming another provider's productCode creates the importer's own product", async (t) => {
  const { server, product } = t.context;
  // A provider of its own, so that its TENANT-A does not show in the other tests' listings.
  const importer = await createProviderWithClient(server, "catalog:write");
  const token = await accessToken(server.baseUrl, importer.clientId, importer.clientSecret);
  const imported = await rest(
    server.baseUrl,
    "POST",
    `${PRODUCTS}/import`,
    [{ productCode: "TENANT-A", name: "imported by the other provider" }],
    { authorization: `Bearer ${token}` },
  );
  t.is(imported.status, 200, JSON.stringify(imported.body));
  t.like(imported.body, { createdCount: 1, updatedCount: 0 });
  t.not(imported.body.products[0].id, product.id);
  t.is(imported.body.products[0].providerId, importer.providerId);
  const ours = await rest(server.baseUrl, "GET", `${PRODUCTS}/${product.id}`);
  t.like(ours.body, { name: SECRET_NAME, revisionNumber: product.revisionNumber });
});

test("another provider's client cannot be read, rotated, enabled, disabled or deleted: 404", async (t) => {
  const { server, other } = t.context;
  const { authorization } = other;
  const target = `${CLIENTS}/${server.admin.clientId}`;
  const calls: [string, string, unknown?][] = [
    ["GET", target],
    ["POST", `${target}/secret`, {}],
    ["PUT", `${target}/enabled/false`],
    ["PUT", `${target}/enabled/true`],
    ["DELETE", target],
  ];
  for (const [method, path, body] of calls) {
    const response = await rest(server.baseUrl, method, path, body, { authorization });
    t.is(response.status, 404, `${method} ${path}: ${JSON.stringify(response.body)}`);
    t.false(JSON.stringify(response.body).includes("clientSecret"), `${method} ${path}`);
  }
  const theirs = await rest(server.baseUrl, "GET", `${CLIENTS}/${other.clientId}`);
  t.is(theirs.status, 404, "and the other way round");

  const stillMine = await rest(server.baseUrl, "GET", target);
  t.like(stillMine.body, { clientId: server.admin.clientId, disabled: false });
  const token = await requestToken(server.baseUrl, server.admin.clientId, server.admin.clientSecret);
  t.is(token.status, 200, "the secret was not rotated");
  const listed = await rest(server.baseUrl, "GET", CLIENTS);
  t.false(listed.body.items.some((client: { clientId: string }) => client.clientId === other.clientId));
});

test("a client created by another provider's client belongs to that provider and sees only its products", async (t) => {
  const { server, other } = t.context;
  const created = await rest(
    server.baseUrl,
    "POST",
    CLIENTS,
    { name: "reader of the other provider", scopes: ["catalog:read"] },
    { authorization: other.authorization },
  );
  t.is(created.status, 200);
  t.is(created.body.client.providerId, other.providerId);
  const token = await accessToken(server.baseUrl, created.body.client.clientId, created.body.clientSecret);
  const listed = await rest(server.baseUrl, "GET", `${PRODUCTS}?pageSize=100`, undefined, {
    authorization: `Bearer ${token}`,
  });
  t.is(listed.status, 200);
  t.true(listed.body.items.every((item: { providerId: string }) => item.providerId === other.providerId));
  t.false(JSON.stringify(listed.body).includes(SECRET_NAME));
});

test("an import naming another provider's product, feature or asset ids learns nothing: it gets ids of its own", async (t) => {
  const { server, other } = t.context;
  const theirs = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "THEIRS-IDS" });
  const feature = await rest(server.baseUrl, "POST", `${PRODUCTS}/${theirs.body.id}/features`, { featureCode: "f" });
  const asset = await rest(server.baseUrl, "POST", `${PRODUCTS}/${theirs.body.id}/monitored-resources`, {
    metricName: "m",
  });
  const imported = await rest(
    server.baseUrl,
    "POST",
    `${PRODUCTS}/import`,
    [
      {
        id: theirs.body.id,
        productCode: "MINE-IDS",
        features: [{ id: feature.body.id, featureCode: "f" }],
        monitoredAssets: [{ id: asset.body.id, metricName: "m" }],
      },
    ],
    { authorization: other.authorization },
  );
  t.is(imported.status, 200, JSON.stringify(imported.body));
  const [product] = imported.body.products;
  t.not(product.id, theirs.body.id);
  t.not(product.features[0].id, feature.body.id);
  t.not(product.monitoredAssets[0].id, asset.body.id);
  const untouched = await rest(server.baseUrl, "GET", `${PRODUCTS}/${theirs.body.id}`);
  t.is(untouched.body.productCode, "THEIRS-IDS");
});

test("a feature can only meter an asset of its own product, on update and import too", async (t) => {
  const { server } = t.context;
  const owner = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "METER-OWNER" });
  const asset = await rest(server.baseUrl, "POST", `${PRODUCTS}/${owner.body.id}/monitored-resources`, {
    metricName: "calls",
  });
  const stranger = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "METER-STRANGER" });
  const update = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${stranger.body.id}`, {
    features: [{ featureCode: "x", meteredAssetId: asset.body.id }],
  });
  t.is(update.status, 400);
  t.is(update.body.errors[0].field, "features[0].meteredAssetId");
  const imported = await rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [
    { productCode: "METER-IMPORT", features: [{ featureCode: "x", meteredAssetId: asset.body.id }] },
  ]);
  t.is(imported.status, 400);
  const sameImport = await rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [
    {
      productCode: "METER-SELF",
      monitoredAssets: [{ id: "7a1b2c3d-0000-4000-8000-00000000abcd", metricName: "own" }],
      features: [{ featureCode: "y", meteredAssetId: "7a1b2c3d-0000-4000-8000-00000000abcd" }],
    },
  ]);
  t.is(sameImport.status, 200, "a feature may meter an asset imported with it");
});
