import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { EntitlementService } from "../../gen/provision/v1/entitlement_pb.js";
import { accessToken } from "../support/auth.js";
import { sendAuthorization } from "../support/credentials.js";
import { createProviderWithClient } from "../support/providers.js";
import { type JsonResponse, PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

type Mode = "MySQL" | "SQLite";
const MODES: Mode[] = ["MySQL", "SQLite"];

const ENTITLEMENTS = "/api/v1/provision/admin/entitlements";
const OPERATIONAL = "/api/v1/provision/operational/entitlement/entitlements";
const DAY_MS = 86_400_000;
const UNKNOWN_ID = "6f1c2e4a-0000-4000-8000-000000000000";

/** A clock moving one second at every reading, whose latest reading a test can see. */
function countingClock() {
  let current = Date.parse("2026-05-01T00:00:00Z");
  return {
    now: () => {
      current += 1000;
      return new Date(current);
    },
    get current() {
      return current;
    },
  };
}

interface ModeContext {
  server: TestServer;
  clock: ReturnType<typeof countingClock>;
  /** Another provider's bearer authorization. */
  other: string;
}

const test = anyTest as TestFn<Record<Mode, ModeContext>>;

test.before(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-entitlements-"));
  for (const mode of MODES) {
    const clock = countingClock();
    const server = await startTestServer(
      mode === "MySQL" ? { clock } : { clock, embedded: { file: path.join(folder, "provision.sqlite") } },
    );
    const other = await createProviderWithClient(server);
    const token = await accessToken(server.baseUrl, other.clientId, other.clientSecret);
    t.context[mode] = { server, clock, other: `Bearer ${token}` };
  }
});

test.after.always(async (t) => {
  for (const mode of MODES) await t.context[mode]?.server.close();
});

// --- helpers ---------------------------------------------------------------------------------------------

const tag = () => randomBytes(4).toString("hex");

function expectStatus(response: JsonResponse, status: number, what: string) {
  if (response.status !== status) {
    throw new Error(`${what} answered ${response.status}: ${JSON.stringify(response.body)}`);
  }
  return response.body;
}

/** A catalog product with these features (and monitored assets), as the catalog answers it. */
async function catalogProduct(
  server: TestServer,
  code: string,
  features: Record<string, unknown>[] = [],
  metrics: string[] = [],
) {
  const created = expectStatus(await rest(server.baseUrl, "POST", PRODUCTS, { productCode: code }), 200, "product");
  for (const metricName of metrics) {
    const path = `${PRODUCTS}/${created.id}/monitored-resources`;
    expectStatus(await rest(server.baseUrl, "POST", path, { metricName }), 200, "asset");
  }
  if (features.length > 0) {
    expectStatus(await rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.id}`, { features }), 200, "features");
  }
  return expectStatus(await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.id}`), 200, "product read");
}

async function createEntitlement(server: TestServer, body: Record<string, unknown>) {
  return expectStatus(await rest(server.baseUrl, "POST", ENTITLEMENTS, body), 200, "create entitlement");
}

/** Asserts a 400 problem naming exactly `fields`. */
function assertInvalid(t: ExecutionContext, response: JsonResponse, fields: string[], what: string) {
  t.is(response.status, 400, `${what}: ${JSON.stringify(response.body)}`);
  t.is(response.headers.get("content-type"), "application/problem+json", what);
  t.deepEqual(
    (response.body.errors ?? []).map((error: { field: string }) => error.field).sort(),
    [...fields].sort(),
    `${what}: ${JSON.stringify(response.body)}`,
  );
}

async function revisionOf(server: TestServer, id: string): Promise<number> {
  const [row] = await server.app.dataSource.query("SELECT revision FROM entitlements WHERE id = ?", [id]);
  return Number(row.revision);
}

// --- tests -----------------------------------------------------------------------------------------------

for (const mode of MODES) {
  test(`${mode}: create copies the products' features in order; get answers the same entitlement`, async (t) => {
    const { server, clock } = t.context[mode];
    const id = tag();
    const first = await catalogProduct(server, `FIRST-${id}`, [
      { featureCode: "reports", value: "10", canModifyValueOnEntitlement: true },
      { featureCode: "export", isEnabled: false, isAvailableDuringTrialPeriod: true },
    ]);
    const second = await catalogProduct(server, `SECOND-${id}`, [{ featureCode: "sync" }]);
    const deleted = await catalogProduct(server, `DELETED-${id}`);
    await server.app.dataSource.query("UPDATE products SET is_deleted = 1 WHERE id = ?", [deleted.id]);

    const before = clock.current;
    const created = await createEntitlement(server, {
      name: `Gold ${id}`,
      customerContactEmail: "buyer@example.test",
      customerId: "5a0c9e8e-1111-4000-8000-000000000001",
      orderId: `ORD-${id}`,
      licenseKey: `KEY-${id}`,
      productIds: [second.id, first.id],
      isTrial: true,
      activationPolicy: { trialActivationPolicy: { trialPeriod: "7.00:00:00" } },
    });
    const after = clock.current;
    t.like(created, {
      name: `Gold ${id}`,
      customerContactEmail: "buyer@example.test",
      licenseKey: `KEY-${id}`,
      allowLicenseActivation: true,
      isEntitlementTrial: true,
      isRevoked: false,
      isTemplateForNewEntitlements: false,
    });
    t.deepEqual(
      created.products.map((product: { id: string }) => product.id),
      [second.id, first.id],
    );
    t.deepEqual(created.products[1].features, first.features, "products are the catalog's");
    t.deepEqual(
      created.features.map((feature: { featureCode: string; productId: string; value: string; isEnabled: boolean }) => [
        feature.featureCode,
        feature.productId,
        feature.value,
        feature.isEnabled,
      ]),
      [
        ["sync", second.id, "", true],
        ["export", first.id, "", false],
        ["reports", first.id, "10", true],
      ],
    );
    const catalogFeatureIds = new Set([...first.features, ...second.features].map((feature) => feature.id));
    t.false(
      created.features.some((feature: { id: string }) => catalogFeatureIds.has(feature.id)),
      "new ids",
    );
    const trialEnd = Date.parse(created.activationPolicy.trialActivationPolicy.trialEndsAt) - 7 * DAY_MS;
    t.true(trialEnd > before && trialEnd <= after, "the trial ends a trialPeriod after creation");
    t.is(created.activationPolicy.requiredAuthenticationLevel, 1, "unset: the level it means, as the contract has it");

    const read = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${created.id}`);
    t.is(read.status, 200);
    t.deepEqual(read.body, created);

    const refused = await rest(server.baseUrl, "POST", ENTITLEMENTS, { productIds: [first.id, deleted.id] });
    assertInvalid(t, refused, ["productIds[1]"], "a deleted product");
    const taken = await rest(server.baseUrl, "POST", ENTITLEMENTS, { licenseKey: `KEY-${id}` });
    t.is(taken.status, 409);
    t.is(taken.body.type, "urn:provision:problem:license-key-taken");
  });

  test(`${mode}: entitlements and templates each get their own copy of each monitored asset`, async (t) => {
    const { server } = t.context[mode];
    const id = tag();
    const product = expectStatus(
      await rest(server.baseUrl, "POST", PRODUCTS, { productCode: `METERED-${id}` }),
      200,
      "product",
    );
    const assetsPath = `${PRODUCTS}/${product.id}/monitored-resources`;
    const addAsset = async (body: Record<string, unknown>) =>
      expectStatus(await rest(server.baseUrl, "POST", assetsPath, body), 200, "asset");
    const calls = await addAsset({ metricName: "api-calls", name: "API calls", unit: "calls" });
    const storage = await addAsset({ metricName: "storage", name: "Storage", unit: "GB" });
    const features = [{ featureCode: "api", meteredAssetId: calls.id }, { featureCode: "plain" }];
    expectStatus(await rest(server.baseUrl, "PUT", `${PRODUCTS}/${product.id}`, { features }), 200, "features");
    const catalogIds = [calls.id, storage.id];

    interface EntitledAsset {
      id: string;
      productId: string;
      entitlementId: string;
      metricName: string;
      name: string;
      unit: string;
    }

    /** The parts of an entitlement's JSON that asset copies show in. */
    interface Entitled {
      id: string;
      products: { id: string; monitoredAssets: EntitledAsset[] }[];
      features: { featureCode: string; meteredAssetId: string }[];
    }

    /** Asserts `entitlement` holds a copy of each catalog asset, its "api" feature metered by its own copy. */
    const assertOwnCopies = (entitlement: Entitled, what: string) => {
      const [view] = entitlement.products;
      t.is(view.id, product.id, what);
      const copies = view.monitoredAssets;
      t.deepEqual(
        copies.map((asset) => [asset.metricName, asset.name, asset.unit, asset.productId, asset.entitlementId]),
        [
          ["api-calls", "API calls", "calls", product.id, entitlement.id],
          ["storage", "Storage", "GB", product.id, entitlement.id],
        ],
        what,
      );
      t.false(
        copies.some((asset) => catalogIds.includes(asset.id)),
        `${what}: new ids`,
      );
      const metered = Object.fromEntries(entitlement.features.map((f) => [f.featureCode, f.meteredAssetId]));
      t.deepEqual(metered, { api: copies[0].id, plain: "" }, `${what}: metered by its own copy`);
      return copies;
    };

    const entitlement = await createEntitlement(server, { name: `Metered ${id}`, productIds: [product.id] });
    const template = expectStatus(
      await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
        entitlementId: entitlement.id,
        templateName: `Metered ${id}`,
        templateVersion: "1",
      }),
      200,
      "to template",
    );
    const fromTemplate = expectStatus(
      await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/from-template`, {
        entitlementTemplateId: template.id,
      }),
      200,
      "from template",
    ).entitlement;
    const copyIds = [entitlement, template, fromTemplate].flatMap((made, index) =>
      assertOwnCopies(made, ["entitlement", "template", "from template"][index]).map((asset) => asset.id),
    );
    t.is(new Set([...copyIds, ...catalogIds]).size, 8, "every copy is a row of its own");

    const ownAssets = (listed: { monitoredAssets: { id: string }[] }) => listed.monitoredAssets.map((a) => a.id);
    const read = expectStatus(await rest(server.baseUrl, "GET", `${PRODUCTS}/${product.id}`), 200, "product read");
    t.deepEqual(ownAssets(read), catalogIds, "GET shows the product's own assets only");
    const list = expectStatus(
      await rest(server.baseUrl, "GET", `${PRODUCTS}?filter=${encodeURIComponent(`productCode=METERED-${id}`)}`),
      200,
      "product list",
    );
    t.deepEqual(list.items.map(ownAssets), [catalogIds], "the list shows the product's own assets only");

    /** The copies each of the three holds, as GET answers them. */
    const copiesNow = async () =>
      Promise.all(
        [entitlement, template, fromTemplate].map(async (made) => {
          const read = expectStatus(await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${made.id}`), 200, "read");
          return read.products[0].monitoredAssets as EntitledAsset[];
        }),
      );
    const before = await copiesNow();
    t.deepEqual(
      before.flatMap((copies) => copies.map((asset) => asset.id)),
      copyIds,
    );
    const updated = expectStatus(
      await rest(server.baseUrl, "PUT", assetsPath, { metricName: "api-calls", name: "API requests", unit: "req" }),
      200,
      "update asset",
    );
    t.like(updated, { id: calls.id, name: "API requests", unit: "req", entitlementId: "" });
    const imported = expectStatus(
      await rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [
        { productCode: `METERED-${id}`, monitoredAssets: [{ metricName: "storage", name: "Disk", unit: "TB" }] },
      ]),
      200,
      "import",
    );
    t.is(imported.updatedCount, 1);
    t.deepEqual(await copiesNow(), before, "the copies are untouched");
    const reread = expectStatus(await rest(server.baseUrl, "GET", `${PRODUCTS}/${product.id}`), 200, "product");
    t.deepEqual(
      reread.monitoredAssets.map((asset: EntitledAsset) => [asset.id, asset.name, asset.unit]),
      [
        [calls.id, "API requests", "req"],
        [storage.id, "Disk", "TB"],
      ],
    );
  });

  test(`${mode}: a trial starting at first activation gets no trialEndsAt at creation`, async (t) => {
    const { server } = t.context[mode];
    const created = await createEntitlement(server, {
      isTrial: true,
      activationPolicy: {
        trialActivationPolicy: { trialPeriod: "3600s", trialPeriodStartsAfterFirstActivation: true },
      },
    });
    t.is(created.activationPolicy.trialActivationPolicy.trialEndsAt, null);
    t.is(created.activationPolicy.trialActivationPolicy.trialPeriod, "01:00:00");
  });

  test(`${mode}: bad input answers 400 problems naming each field`, async (t) => {
    const { server } = t.context[mode];
    const cases: [Record<string, unknown>, string[]][] = [
      [{ productIds: ["not-a-uuid"] }, ["productIds[0]"]],
      [{ productIds: [UNKNOWN_ID] }, ["productIds[0]"]],
      [{ productIds: [UNKNOWN_ID, UNKNOWN_ID.toUpperCase()] }, ["productIds[1]"]],
      [{ name: "n".repeat(256), version: "v".repeat(65) }, ["name", "version"]],
      [{ customerContactEmail: "not an email", customerId: "42" }, ["customerContactEmail", "customerId"]],
      [{ orderId: "o".repeat(256), reference: "r".repeat(256) }, ["orderId", "reference"]],
      [{ expirationDateTime: "0999-12-31T00:00:00Z" }, ["expirationDateTime"]],
      [{ isTemplateForNewEntitlements: true, licenseKey: "K" }, ["licenseKey"]],
      [
        {
          activationPolicy: {
            requiredAuthenticationLevel: 7,
            requireOrganizationGroupMember: "group",
            claimBasedActivation: { numberOfSeats: -1, leaseTime: "-01:00:00" },
            subscriptionPolicy: { renewPeriod: "fortnight", subscriptionPeriodsLeft: -2 },
          },
        },
        [
          "activationPolicy.requiredAuthenticationLevel",
          "activationPolicy.requireOrganizationGroupMember",
          "activationPolicy.claimBasedActivation.leaseTime",
          "activationPolicy.claimBasedActivation.numberOfSeats",
          "activationPolicy.subscriptionPolicy.renewPeriod",
          "activationPolicy.subscriptionPolicy.subscriptionPeriodsLeft",
        ],
      ],
      [
        {
          activationPolicy: {
            timeRestrictedActivationPolicy: {
              notValidBeforeTimestamp: "2030-01-01T00:00:00Z",
              notValidAfterTimestamp: "2029-01-01T00:00:00Z",
            },
            trialActivationPolicy: {
              cannotActivateBeforeTimestamp: "2030-01-01T00:00:00Z",
              notValidAfterTimestamp: "2030-01-01T00:00:00Z",
            },
            subscriptionPolicy: {
              cannotActivateBeforeTimestamp: "2030-01-01T00:00:00.5Z",
              notValidAfterTimestamp: "2030-01-01T00:00:00.25Z",
            },
          },
        },
        [
          "activationPolicy.subscriptionPolicy.notValidAfterTimestamp",
          "activationPolicy.timeRestrictedActivationPolicy.notValidAfterTimestamp",
          "activationPolicy.trialActivationPolicy.notValidAfterTimestamp",
        ],
      ],
    ];
    for (const [body, fields] of cases) {
      assertInvalid(t, await rest(server.baseUrl, "POST", ENTITLEMENTS, body), fields, JSON.stringify(body));
    }
    const tooMany = Array.from({ length: 101 }, () => UNKNOWN_ID);
    t.is((await rest(server.baseUrl, "POST", ENTITLEMENTS, { productIds: tooMany })).status, 400);
    assertInvalid(t, await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/nope`), ["entitlementId"], "get");
    t.is((await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${UNKNOWN_ID}`)).status, 404);
    assertInvalid(t, await rest(server.baseUrl, "GET", `${ENTITLEMENTS}?filter=color=red`), ["filter"], "filter");
    assertInvalid(t, await rest(server.baseUrl, "GET", `${ENTITLEMENTS}?sortOrder=isRevoked`), ["sortOrder"], "sort");
    assertInvalid(t, await rest(server.baseUrl, "GET", `${ENTITLEMENTS}?pageSize=101`), ["pageSize"], "page size");
  });

  test(`${mode}: list pages, filters, sorts and searches free text, answering full entitlements`, async (t) => {
    const { server } = t.context[mode];
    const id = tag();
    const product = await catalogProduct(server, `LISTED-${id}`, [{ featureCode: "f1" }]);
    const names = ["Delta", "alpha", "Charlie", "bravo", "Echo"];
    for (const [index, name] of names.entries()) {
      await createEntitlement(server, {
        name,
        reference: id,
        orderId: `PO-${index}-${id}`,
        customerContactEmail: index < 2 ? `ops@acme-${id}.test` : `it@globex-${id}.test`,
        isRevoked: index === 4,
        productIds: [product.id],
      });
    }
    const list = async (query: string) =>
      expectStatus(await rest(server.baseUrl, "GET", `${ENTITLEMENTS}?${query}`), 200, query);
    const filter = (text: string) => `filter=${encodeURIComponent(`reference=${id} ${text}`.trim())}`;

    const first = await list(`${filter("")}&sortOrder=name&pageSize=2`);
    t.like(first, { currentPage: 1, pageSize: 2, totalCount: 5, totalPages: 3, from: 1, to: 2, hasNextPage: true });
    t.deepEqual(
      first.items.map((item: { name: string }) => item.name),
      ["Charlie", "Delta"],
      "exact order: upper case first",
    );
    const last = await list(`${filter("")}&sortOrder=name&pageSize=2&pageNumber=3`);
    t.like(last, { from: 5, to: 5, hasNextPage: false, hasPreviousPage: true });
    t.deepEqual(
      last.items.map((item: { name: string }) => item.name),
      ["bravo"],
    );
    t.is(last.items[0].products[0].id, product.id, "items are full entitlements");
    t.is(last.items[0].features[0].featureCode, "f1");

    const byOrder = await list(`${filter("")}&sortOrder=-orderId`);
    t.deepEqual(
      byOrder.items.map((item: { name: string }) => item.name),
      ["Echo", "bravo", "Charlie", "alpha", "Delta"],
    );
    const acme = await list(`${filter(`customerContactEmail~ACME-${id}`)}&sortOrder=createdAt desc`);
    t.deepEqual(
      acme.items.map((item: { name: string }) => item.name),
      ["alpha", "Delta"],
    );
    const revoked = await list(filter("isRevoked=true"));
    t.deepEqual(
      revoked.items.map((item: { name: string }) => item.name),
      ["Echo"],
    );
    const freeText = await list(filter(`po-3-${id}`));
    t.deepEqual(
      freeText.items.map((item: { name: string }) => item.name),
      ["bravo"],
    );
    const byEmailText = await list(`filter=${encodeURIComponent(`globex-${id} CHARLIE`)}`);
    t.deepEqual(
      byEmailText.items.map((item: { name: string }) => item.name),
      ["Charlie"],
    );
    const none = await list(filter("createdAt<2000-01-01"));
    t.like(none, { totalCount: 0, items: [] });

    const customerId = randomUUID().toUpperCase();
    await createEntitlement(server, { name: "Upper", reference: id, customerId });
    const byCustomer = await list(filter(`customerId=${customerId}`));
    t.deepEqual(
      byCustomer.items.map((item: { customerId: string }) => item.customerId),
      [customerId.toLowerCase()],
      "the id as sent finds the entitlement it is stored lower-cased on",
    );
  });

  test(`${mode}: update changes only what is sent, revokes, and follows the feature rules`, async (t) => {
    const { server } = t.context[mode];
    const product = await catalogProduct(server, `UPD-${tag()}`, [
      { featureCode: "seats", value: "5", canModifyValueOnEntitlement: true },
      { featureCode: "beta", isEnabled: false, canModifyEnabledOnEntitlement: true },
      { featureCode: "locked", value: "1" },
    ]);
    const created = await createEntitlement(server, {
      name: "Before",
      description: "kept",
      productIds: [product.id],
      expirationDateTime: "2027-01-01T00:00:00Z",
      activationPolicy: { requireProductCode: true },
    });
    const path = `${ENTITLEMENTS}/${created.id}`;
    const revision = await revisionOf(server, created.id);
    const [seats, beta, locked] = ["seats", "beta", "locked"].map((code) =>
      created.features.find((feature: { featureCode: string }) => feature.featureCode === code),
    );

    t.is(created.updatedAt, created.createdAt);
    const renamed = expectStatus(await rest(server.baseUrl, "PUT", path, { name: "After" }), 200, "rename");
    t.like(renamed, { name: "After", description: "kept", expirationDateTime: "2027-01-01T00:00:00Z" });
    t.is(renamed.createdAt, created.createdAt);
    t.true(
      Date.parse(renamed.updatedAt) > Date.parse(created.updatedAt),
      `${created.updatedAt} → ${renamed.updatedAt}`,
    );
    t.true(renamed.activationPolicy.requireProductCode);
    t.is(await revisionOf(server, created.id), revision + 1);

    const changed = expectStatus(
      await rest(server.baseUrl, "PUT", path, {
        features: [
          { id: seats.id, value: "25" },
          { featureCode: "beta", isEnabled: true, featureExpiration: "2026-12-31T00:00:00Z" },
        ],
        clearExpirationDateTime: true,
        activationPolicy: { claimBasedActivation: { numberOfSeats: 3 } },
      }),
      200,
      "features",
    );
    const after = (code: string) =>
      changed.features.find((feature: { featureCode: string }) => feature.featureCode === code);
    t.is(after("seats").value, "25");
    t.like(after("beta"), { isEnabled: true, featureExpiration: "2026-12-31T00:00:00Z" });
    t.deepEqual(after("locked"), locked);
    t.is(changed.expirationDateTime, null);
    t.false(changed.activationPolicy.requireProductCode, "the policy is replaced as a whole");
    t.is(changed.activationPolicy.claimBasedActivation.numberOfSeats, 3);

    const refused = await rest(server.baseUrl, "PUT", path, {
      name: "Never",
      features: [
        { id: locked.id, value: "99" },
        { id: seats.id, isEnabled: false },
        { featureCode: "missing" },
        { id: UNKNOWN_ID },
      ],
    });
    assertInvalid(
      t,
      refused,
      ["features[0].value", "features[1].isEnabled", "features[2].featureCode", "features[3].id"],
      "feature rules",
    );
    t.is(expectStatus(await rest(server.baseUrl, "GET", path), 200, "get").name, "After", "nothing was written");
    t.not(beta.isEnabled, true);

    const revoked = expectStatus(await rest(server.baseUrl, "PUT", path, { isRevoked: true }), 200, "revoke");
    t.true(revoked.isRevoked);
    t.is(revoked.name, "After");
    t.is(await revisionOf(server, created.id), revision + 3);
    const sentBack = await rest(server.baseUrl, "PUT", path, {
      features: [{ id: locked.id, value: locked.value, isEnabled: locked.isEnabled }],
    });
    t.is(sentBack.status, 200, `a locked feature sent back as it stands: ${JSON.stringify(sentBack.body)}`);
    t.is(sentBack.body.updatedAt, revoked.updatedAt, "a write that changes nothing leaves updatedAt");
    const whole = { ...sentBack.body, features: sentBack.body.features.map(({ id }: { id: string }) => ({ id })) };
    const unchanged = expectStatus(await rest(server.baseUrl, "PUT", path, whole), 200, "sent back whole");
    t.deepEqual(unchanged, sentBack.body);
    t.is(await revisionOf(server, created.id), revision + 3, "nor the revision");
    const twice = await rest(server.baseUrl, "PUT", path, {
      features: [
        { id: seats.id, value: "1" },
        { featureCode: "seats", value: "2" },
      ],
    });
    assertInvalid(t, twice, ["features[1]"], "one feature named twice");
    t.is((await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${UNKNOWN_ID}`, { name: "x" })).status, 404);
  });

  test(`${mode}: a template is made from an entitlement and entitlements from templates`, async (t) => {
    const { server } = t.context[mode];
    const id = tag();
    const product = await catalogProduct(server, `TPL-${id}`, [
      { featureCode: "quota", value: "1", canModifyValueOnEntitlement: true },
    ]);
    const source = await createEntitlement(server, {
      name: "Source",
      customerContactEmail: "c@example.test",
      orderId: "O-1",
      licenseKey: `SRC-${id}`,
      productIds: [product.id],
      activationPolicy: { subscriptionPolicy: { renewPeriod: "month", isSubscriptionActive: true } },
    });
    const quota = source.features[0];
    await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${source.id}`, { features: [{ id: quota.id, value: "7" }] });

    const convert = (version: string) =>
      rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
        entitlementId: source.id,
        templateName: `Plan ${id}`,
        templateVersion: version,
      });
    const v1 = expectStatus(await convert("1"), 200, "convert");
    t.like(v1, {
      name: `Plan ${id}`,
      version: "1",
      isTemplateForNewEntitlements: true,
      customerContactEmail: "",
      orderId: "",
      licenseKey: "",
    });
    t.is(v1.features[0].value, "7", "the source's own feature values");
    t.not(v1.features[0].id, quota.id);
    t.deepEqual(v1.activationPolicy, source.activationPolicy);
    const duplicate = await convert("1");
    t.is(duplicate.status, 409);
    t.is(duplicate.body.type, "urn:provision:problem:template-exists");
    const v2 = expectStatus(await convert("2"), 200, "convert v2");
    assertInvalid(
      t,
      await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, { entitlementId: source.id }),
      ["templateName"],
      "no name",
    );

    const fromTemplate = (body: Record<string, unknown>) =>
      rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/from-template`, body);
    const byId = expectStatus(
      await fromTemplate({
        entitlementTemplateId: v1.id,
        entitlementParameters: { customerContactEmail: "new@example.test", licenseKey: `NEW-${id}`, isTrial: true },
      }),
      200,
      "from template by id",
    );
    t.like(byId.entitlement, {
      name: `Plan ${id}`,
      version: "1",
      customerContactEmail: "new@example.test",
      licenseKey: `NEW-${id}`,
      isEntitlementTrial: true,
      isTemplateForNewEntitlements: false,
      allowLicenseActivation: true,
    });
    t.is(byId.entitlement.products[0].id, product.id);
    t.is(byId.entitlement.features[0].value, "7");
    t.is(byId.activationInvitation, null, "no code without licenseActivationWorkflowParameters");

    const latest = expectStatus(
      await fromTemplate({
        fromEntitlementTemplateName: `Plan ${id}`,
        entitlementParameters: { name: "Customer copy" },
        licenseActivationWorkflowParameters: { email: "user@example.test", maxDeviceActivations: 2 },
      }),
      200,
      "from template by name",
    );
    t.is(latest.entitlement.version, v2.version, "the most recent template of that name");
    t.is(latest.entitlement.name, "Customer copy");
    t.like(latest.activationInvitation, {
      entitlementId: latest.entitlement.id,
      email: "user@example.test",
      maxDeviceActivations: 2,
    });
    const codes = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${latest.entitlement.id}/activation-codes`);
    t.deepEqual(
      codes.body.items?.map((code: { id: string }) => code.id),
      [latest.activationInvitation.id],
      "the code was committed with the entitlement",
    );

    const byVersion = await fromTemplate({
      fromEntitlementTemplateName: `Plan ${id}`,
      withEntitlementTemplateVersion: "1",
    });
    t.is(expectStatus(byVersion, 200, "by version").entitlement.version, "1");
    const badCode = await fromTemplate({
      entitlementTemplateId: v1.id,
      licenseActivationWorkflowParameters: { email: "not an email" },
    });
    assertInvalid(t, badCode, ["licenseActivationWorkflowParameters.email"], "bad invitation");
    t.is((await fromTemplate({ fromEntitlementTemplateName: `Nothing ${id}` })).status, 404);
    assertInvalid(t, await fromTemplate({ entitlementTemplateId: source.id }), ["entitlementTemplateId"], "not one");
    assertInvalid(t, await fromTemplate({}), ["entitlementTemplateId"], "no template named");
  });

  test(`${mode}: ten concurrent conversions to one name and version make exactly one template`, async (t) => {
    const { server } = t.context[mode];
    const source = await createEntitlement(server, { name: "Raced" });
    const templateName = `Race ${tag()}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
          entitlementId: source.id,
          templateName,
          templateVersion: "1",
        }),
      ),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    t.deepEqual(statuses, [200, ...Array(9).fill(409)], JSON.stringify(answers.map((answer) => answer.body)));
    const [count] = await server.app.dataSource.query(
      "SELECT COUNT(*) AS templates FROM entitlements WHERE template_name = ?",
      [templateName],
    );
    t.is(Number(count.templates), 1);
  });

  test(`${mode}: the operational switches change the entitlement's policy`, async (t) => {
    const { server } = t.context[mode];
    const created = await createEntitlement(server, { name: "Switched" });
    const base = `${OPERATIONAL}/${created.id}`;
    const disabled = await rest(server.baseUrl, "PUT", `${base}/activation-enabled/false`);
    t.false(expectStatus(disabled, 200, "disable").allowLicenseActivation);
    const enabled = await rest(server.baseUrl, "PUT", `${base}/activation-enabled/true`);
    t.true(expectStatus(enabled, 200, "enable").allowLicenseActivation);

    const seats = await rest(server.baseUrl, "PUT", `${base}/policies/claim-based/seats`, {
      numberOfSeats: 5,
      isFloatingLicense: true,
    });
    t.like(expectStatus(seats, 200, "seats").activationPolicy.claimBasedActivation, {
      numberOfSeats: 5,
      isFloatingLicense: true,
    });
    const fewer = await rest(server.baseUrl, "PUT", `${base}/policies/claim-based/seats`, { numberOfSeats: 2 });
    t.like(expectStatus(fewer, 200, "fewer").activationPolicy.claimBasedActivation, {
      numberOfSeats: 2,
      isFloatingLicense: true,
    });
    assertInvalid(
      t,
      await rest(server.baseUrl, "PUT", `${base}/policies/claim-based/seats`, { numberOfSeats: -1 }),
      ["numberOfSeats"],
      "negative seats",
    );
    for (const body of [undefined, {}, { numberOfseats: 7 }]) {
      const unset = await rest(server.baseUrl, "PUT", `${base}/policies/claim-based/seats`, body);
      assertInvalid(t, unset, ["numberOfSeats"], `seats left out: ${JSON.stringify(body)}`);
    }
    const unlimited = await rest(server.baseUrl, "PUT", `${base}/policies/claim-based/seats`, { numberOfSeats: 0 });
    t.is(expectStatus(unlimited, 200, "no seat limit").activationPolicy.claimBasedActivation.numberOfSeats, 0);

    const noSubscription = await rest(server.baseUrl, "PUT", `${base}/policies/subscription/active`, {
      isSubscriptionActive: false,
    });
    t.is(noSubscription.status, 409);
    t.is(noSubscription.body.type, "urn:provision:problem:no-subscription-policy");
    await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${created.id}`, {
      activationPolicy: { subscriptionPolicy: { renewPeriod: "P1M", isSubscriptionActive: true } },
    });
    const inactive = await rest(server.baseUrl, "PUT", `${base}/policies/subscription/active`, {
      isSubscriptionActive: false,
    });
    t.false(expectStatus(inactive, 200, "subscription").activationPolicy.subscriptionPolicy.isSubscriptionActive);
    t.is(inactive.body.activationPolicy.subscriptionPolicy.renewPeriod, "P1M");
    for (const body of [undefined, { active: true }]) {
      const unset = await rest(server.baseUrl, "PUT", `${base}/policies/subscription/active`, body);
      assertInvalid(t, unset, ["isSubscriptionActive"], `the flag left out: ${JSON.stringify(body)}`);
    }
    t.is(await revisionOf(server, created.id), 1 + 7);
  });

  test(`${mode}: another provider's entitlements answer 404 on every call and never show in its list`, async (t) => {
    const { server, other } = t.context[mode];
    const product = await catalogProduct(server, `MINE-${tag()}`);
    const secret = `secret-${tag()}@example.test`;
    const mine = await createEntitlement(server, {
      name: `Plan ${tag()}`,
      customerContactEmail: secret,
      productIds: [product.id],
    });
    await rest(server.baseUrl, "POST", `${ENTITLEMENTS}/templates/to-template`, {
      entitlementId: mine.id,
      templateName: mine.name,
    });
    const calls: [string, string, unknown?][] = [
      ["GET", `${ENTITLEMENTS}/${mine.id}`],
      ["PUT", `${ENTITLEMENTS}/${mine.id}`, { name: "hijacked" }],
      ["POST", `${ENTITLEMENTS}/templates/to-template`, { entitlementId: mine.id, templateName: "stolen" }],
      ["POST", `${ENTITLEMENTS}/templates/from-template`, { entitlementTemplateId: mine.id }],
      ["POST", `${ENTITLEMENTS}/templates/from-template`, { fromEntitlementTemplateName: mine.name }],
      ["PUT", `${OPERATIONAL}/${mine.id}/activation-enabled/false`],
      ["PUT", `${OPERATIONAL}/${mine.id}/policies/claim-based/seats`, { numberOfSeats: 1 }],
      ["PUT", `${OPERATIONAL}/${mine.id}/policies/subscription/active`, { isSubscriptionActive: true }],
    ];
    for (const [method, path, body] of calls) {
      const response = await rest(server.baseUrl, method, path, body, { authorization: other });
      t.is(response.status, 404, `${method} ${path}: ${JSON.stringify(response.body)}`);
      t.false(JSON.stringify(response.body).includes(secret), `${method} ${path} leaks the entitlement`);
    }
    const listed = await rest(server.baseUrl, "GET", ENTITLEMENTS, undefined, { authorization: other });
    t.false(listed.body.items.some((item: { id: string }) => item.id === mine.id));
    const borrowed = await rest(
      server.baseUrl,
      "POST",
      ENTITLEMENTS,
      { productIds: [product.id] },
      { authorization: other },
    );
    assertInvalid(t, borrowed, ["productIds[0]"], "another provider's product");
    const after = expectStatus(await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${mine.id}`), 200, "mine");
    t.deepEqual(after, mine);
  });
}

test("Connect serves the same implementation", async (t) => {
  const { server } = t.context.MySQL;
  const created = await createEntitlement(server, { name: `Over Connect ${tag()}` });
  const transport = createConnectTransport({
    baseUrl: server.baseUrl,
    httpVersion: "1.1",
    interceptors: [sendAuthorization(server.adminAuthorization)],
  });
  const client = createClient(EntitlementService, transport);
  const read = await client.getEntitlement({ entitlementId: created.id });
  t.is(read.entitlement?.name, created.name);
  const seats = await client.setClaimBasedSeats({ entitlementId: created.id, numberOfSeats: 4 });
  t.is(seats.entitlement?.activationPolicy?.claimBasedActivation?.numberOfSeats, 4);
  const error = ConnectError.from(await t.throwsAsync(client.getEntitlement({ entitlementId: UNKNOWN_ID })));
  t.is(error.code, Code.NotFound);
  const withoutValue = ConnectError.from(
    await t.throwsAsync(client.setActivationEnabled({ entitlementId: created.id })),
  );
  t.is(withoutValue.code, Code.InvalidArgument);
  t.regex(withoutValue.rawMessage, /enable: is required/);
  t.true((await client.getEntitlement({ entitlementId: created.id })).entitlement?.allowLicenseActivation);
  const disabled = await client.setActivationEnabled({ entitlementId: created.id, enable: false });
  t.false(disabled.entitlement?.allowLicenseActivation);
});
