import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createClient as createRedisClient } from "@redis/client";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { accessToken } from "../support/auth.js";
import { pollUntil } from "../support/poll.js";
import { createProviderWithClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";

interface Context {
  /** Two instances on one MySQL database and the local Redis. */
  first: TestServer;
  second: TestServer;
  embedded: TestServer;
  drop(): Promise<void>;
}

const test = anyTest as TestFn<Context>;
const CHANNEL = "provision:invalidate:product-changed";

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.first = await startTestServer({ databaseUrl: database.url });
  t.context.second = await startTestServer({ databaseUrl: database.url });
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-product-cache-"));
  t.context.embedded = await startTestServer({ embedded: { file: path.join(folder, "provision.sqlite") } });
});

test.after.always(async (t) => {
  await t.context.first?.close();
  await t.context.second?.close();
  await t.context.embedded?.close();
  await t.context.drop?.();
});

async function getProduct(server: TestServer, id: string, authorization?: string) {
  const response = await rest(server.baseUrl, "GET", `${PRODUCTS}/${id}`, undefined, {
    ...(authorization ? { authorization } : {}),
  });
  if (response.status !== 200) throw new Error(`GET answered ${response.status}`);
  return response.body;
}

/** A product created through `server`, with one feature and one monitored asset. */
async function productThrough(server: TestServer): Promise<{ id: string; code: string; featureId: string }> {
  const code = `CACHE-${randomUUID()}`;
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: code, name: "original" });
  const feature = await rest(server.baseUrl, "POST", `${PRODUCTS}/${created.body.id}/features`, { featureCode: "f1" });
  const asset = await rest(server.baseUrl, "POST", `${PRODUCTS}/${created.body.id}/monitored-resources`, {
    metricName: "calls",
    metricType: 0,
  });
  if (created.status !== 200 || feature.status !== 200 || asset.status !== 200) throw new Error("setup failed");
  return { id: created.body.id, code, featureId: feature.body.id };
}

let marker = 0;

/**
 * Waits until `server` answers the product from memory, proven by a change written straight to the database
 * (behind the service's back) that its answer does not show. Resolves with that answer.
 */
function cachedOn(server: TestServer, id: string) {
  return pollUntil(
    `${server.baseUrl} to answer product ${id} from memory`,
    async () => {
      const before = await getProduct(server, id);
      marker++;
      await server.app.dataSource.query("UPDATE products SET description = ? WHERE id = ?", [`behind ${marker}`, id]);
      const after = await getProduct(server, id);
      return after.description === before.description ? after : undefined;
    },
    { timeoutMs: 5000, intervalMs: 50 },
  );
}

/** The second instance's answer once `changed` holds of it; fails when that takes over a second. */
function seenBySecond(t: ExecutionContext<Context>, id: string, changed: (product: any) => boolean) {
  return pollUntil(
    "the second instance to answer the changed product",
    async () => {
      const product = await getProduct(t.context.second, id);
      return changed(product) ? product : undefined;
    },
    { timeoutMs: 1000, intervalMs: 20 },
  );
}

const writes: {
  what: string;
  write: (baseUrl: string, product: { id: string; code: string; featureId: string }) => Promise<{ status: number }>;
  changed: (product: any) => boolean;
}[] = [
  {
    what: "an update",
    write: (baseUrl, { id }) => rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { name: "renamed" }),
    changed: (product) => product.name === "renamed",
  },
  {
    what: "a feature added by update",
    write: (baseUrl, { id }) => rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features: [{ featureCode: "f2" }] }),
    changed: (product) => product.features.some((feature: any) => feature.featureCode === "f2"),
  },
  {
    what: "a feature added",
    write: (baseUrl, { id }) => rest(baseUrl, "POST", `${PRODUCTS}/${id}/features`, { featureCode: "f2" }),
    changed: (product) => product.features.some((feature: any) => feature.featureCode === "f2"),
  },
  {
    what: "a feature updated",
    write: (baseUrl, { id, featureId }) =>
      rest(baseUrl, "PUT", `${PRODUCTS}/${id}/features/${featureId}`, { name: "feature renamed" }),
    changed: (product) => product.features[0].name === "feature renamed",
  },
  {
    what: "a feature removed",
    write: (baseUrl, { id, featureId }) =>
      rest(baseUrl, "PUT", `${PRODUCTS}/${id}`, { features: [{ id: featureId, isDeleted: true }] }),
    changed: (product) => product.features.length === 0,
  },
  {
    what: "a monitored asset added",
    write: (baseUrl, { id }) =>
      rest(baseUrl, "POST", `${PRODUCTS}/${id}/monitored-resources`, { metricName: "seats", metricType: 0 }),
    changed: (product) => product.monitoredAssets.length === 2,
  },
  {
    what: "a monitored asset updated",
    write: (baseUrl, { id }) =>
      rest(baseUrl, "PUT", `${PRODUCTS}/${id}/monitored-resources`, { metricName: "calls", name: "Calls" }),
    changed: (product) => product.monitoredAssets[0].name === "Calls",
  },
  {
    what: "a product deleted by import",
    write: (baseUrl, { code }) => rest(baseUrl, "POST", `${PRODUCTS}/import`, [{ productCode: code, isDeleted: true }]),
    changed: (product) => product.isDeleted === true,
  },
];

for (const { what, write, changed } of writes) {
  test(`${what} through one instance is seen by another within a second`, async (t) => {
    const { first, second } = t.context;
    const product = await productThrough(first);
    t.false(changed(await cachedOn(second, product.id)));
    t.is((await write(first.baseUrl, product)).status, 200);
    t.true(changed(await seenBySecond(t, product.id, changed)));
  });

  test(`${what} is seen at once by the instance that made it, embedded and on MySQL`, async (t) => {
    for (const server of [t.context.embedded, t.context.first]) {
      const product = await productThrough(server);
      await cachedOn(server, product.id);
      t.is((await write(server.baseUrl, product)).status, 200);
      t.true(changed(await getProduct(server, product.id)), server.baseUrl);
    }
  });
}

test("a change is published as provider/product on the bus, and a message published there drops the copy", async (t) => {
  const { first, second } = t.context;
  const product = await productThrough(first);
  const heard: string[] = [];
  const subscriber = createRedisClient({ url: TEST_REDIS_URL });
  await subscriber.connect();
  t.teardown(() => subscriber.close());
  await subscriber.subscribe(CHANNEL, (message) => heard.push(message));
  t.is((await rest(first.baseUrl, "PUT", `${PRODUCTS}/${product.id}`, { name: "published" })).status, 200);
  const key = `${DEFAULT_PROVIDER_ID}/${product.id}`;
  await pollUntil("the change to be published", () => (heard.includes(key) ? true : undefined));

  await cachedOn(second, product.id);
  await second.app.dataSource.query("UPDATE products SET name = ? WHERE id = ?", ["changed by hand", product.id]);
  const publisher = createRedisClient({ url: TEST_REDIS_URL });
  await publisher.connect();
  t.teardown(() => publisher.close());
  await publisher.publish(CHANNEL, key);
  await seenBySecond(t, product.id, (seen) => seen.name === "changed by hand");
  t.pass();
});

test("a product not found is not remembered: one imported with that id is found at once on every instance", async (t) => {
  const { first, second } = t.context;
  await cachedOn(second, (await productThrough(first)).id);
  const id = randomUUID();
  t.is((await rest(second.baseUrl, "GET", `${PRODUCTS}/${id}`)).status, 404);
  const imported = await rest(first.baseUrl, "POST", `${PRODUCTS}/import`, [{ id, productCode: `NEW-${id}` }]);
  t.is(imported.body.createdCount, 1);
  t.is((await getProduct(second, id)).productCode, `NEW-${id}`);
});

test("a product remembered for its provider is not served to another provider", async (t) => {
  const { first } = t.context;
  const product = await productThrough(first);
  const remembered = await cachedOn(first, product.id);
  const other = await createProviderWithClient(first);
  const authorization = `Bearer ${await accessToken(first.baseUrl, other.clientId, other.clientSecret)}`;
  const refused = await rest(first.baseUrl, "GET", `${PRODUCTS}/${product.id}`, undefined, { authorization });
  t.is(refused.status, 404);
  t.false(JSON.stringify(refused.body).includes(product.code));
  t.deepEqual(await getProduct(first, product.id), remembered, "the owner is still served its copy");
});
