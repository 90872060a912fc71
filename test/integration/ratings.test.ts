import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import { bearerWithScopes } from "../support/credentials.js";
import { ENTITLEMENTS, sessionCall } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { type LicensedSession, licensedSession, RATING, RATINGS } from "../support/observability.js";
import { createProviderWithClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];

interface Context {
  servers: Record<Mode, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const STEP = 60_000;

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-ratings-"));
  t.context.servers = {} as Context["servers"];
  for (const mode of MODES) {
    const clock = manualClock(Date.parse("2026-04-01T08:00:00Z"));
    const server = await startTestServer({
      clock,
      ...(mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {}),
    });
    t.context.servers[mode] = { server, clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

function rate(server: TestServer, session: LicensedSession, body: Record<string, unknown>) {
  return rest(
    server.baseUrl,
    "POST",
    RATING,
    { sessionId: session.sessionId, ...body },
    {
      authorization: session.authorization,
    },
  );
}

/** The catalog id and the entitlement's own id of the product's feature `export`. */
async function exportFeature(server: TestServer, session: LicensedSession) {
  const product = await rest(server.baseUrl, "GET", `${PRODUCTS}/${session.productId}`);
  const entitlement = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${session.entitlementId}`);
  return {
    catalogId: product.body.features[0].id as string,
    entitlementCopyId: entitlement.body.features[0].id as string,
  };
}

function fieldsOf(answer: { body: { errors?: { field: string }[] } }) {
  return (answer.body.errors ?? []).map((error) => error.field);
}

each("a rating of a licensed product or feature is stored and answered", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const rated = await rate(server, session, { productId: session.productId, rating: 4, remark: "Works well" });
  t.is(rated.status, 200, JSON.stringify(rated.body));
  t.regex(rated.body.id, /^[0-9a-f-]{36}$/);
  t.like(rated.body, {
    sessionId: session.sessionId,
    productId: session.productId,
    featureId: "",
    rating: 4,
    remark: "Works well",
  });
  t.is(Date.parse(rated.body.createdAt), clock.now().getTime());

  const feature = await exportFeature(server, session);
  t.not(feature.catalogId, feature.entitlementCopyId);
  for (const featureId of [feature.catalogId, feature.entitlementCopyId]) {
    clock.advance(1000);
    const byFeature = await rate(server, session, { productId: session.productId, featureId, rating: 5 });
    t.is(byFeature.status, 200, JSON.stringify(byFeature.body));
    t.is(byFeature.body.featureId, feature.catalogId, "stored under the catalog feature's id");
  }
  const listed = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${session.productId}`);
  t.is(listed.body.totalCount, 3);
  t.deepEqual(listed.body.items[2], rated.body);
});

each("ratings outside 1–5, long remarks and missing or foreign ids are refused", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const elsewhere = await licensedSession(server.baseUrl, "other-device");
  const otherFeature = await exportFeature(server, elsewhere);
  const refusals: [Record<string, unknown>, string][] = [
    [{ productId: session.productId, rating: 0 }, "rating"],
    [{ productId: session.productId, rating: 6 }, "rating"],
    [{ productId: session.productId, rating: -1 }, "rating"],
    [{ productId: session.productId }, "rating"],
    [{ productId: session.productId, rating: 3, remark: "x".repeat(2001) }, "remark"],
    [{ rating: 3 }, "productId"],
    [{ productId: "product-1", rating: 3 }, "productId"],
    [{ productId: elsewhere.productId, rating: 3 }, "productId"],
    [{ productId: session.productId, featureId: otherFeature.catalogId, rating: 3 }, "featureId"],
    [{ productId: session.productId, featureId: crypto.randomUUID(), rating: 3 }, "featureId"],
    [{ sessionId: "", productId: session.productId, rating: 3 }, "sessionId"],
  ];
  for (const [body, field] of refusals) {
    const refused = await rate(server, session, body);
    t.is(refused.status, 400, JSON.stringify(body));
    t.deepEqual(fieldsOf(refused), [field], JSON.stringify(body));
  }
  const longest = await rate(server, session, { productId: session.productId, rating: 1, remark: "é".repeat(2000) });
  t.is(longest.status, 200, "2000 characters of remark are allowed");
  const wrongSession = await rate(server, session, {
    sessionId: elsewhere.sessionId,
    productId: session.productId,
    rating: 3,
  });
  t.is(wrongSession.status, 403);
  t.is(wrongSession.body.type, "urn:provision:problem:wrong-session");

  await sessionCall(server.baseUrl, session.authorization.slice(7), "release");
  const released = await rate(server, session, { productId: session.productId, rating: 5 });
  t.is(released.status, 401);
  const listed = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${session.productId}`);
  t.is(listed.body.totalCount, 1, "only the accepted rating was stored");
});

each("the ratings list filters, pages and averages over every rating selected", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const first = await licensedSession(server.baseUrl, "list-1");
  const second = await licensedSession(server.baseUrl, "list-2");
  const feature = await exportFeature(server, first);
  const start = clock.now().getTime();
  for (const rating of [5, 4, 4, 1]) {
    clock.advance(STEP);
    await rate(server, first, { productId: first.productId, rating });
  }
  clock.advance(STEP);
  await rate(server, first, { productId: first.productId, featureId: feature.catalogId, rating: 2 });
  clock.advance(STEP);
  await rate(server, second, { productId: second.productId, rating: 3 });

  const ofFirst = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${first.productId}&pageSize=2`);
  t.is(ofFirst.status, 200, JSON.stringify(ofFirst.body));
  t.like(ofFirst.body, { totalCount: 5, totalPages: 3, currentPage: 1, hasNextPage: true, averageRating: 16 / 5 });
  t.deepEqual(
    ofFirst.body.items.map((item: { rating: number }) => item.rating),
    [2, 1],
    "newest first",
  );
  const lastPage = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${first.productId}&pageSize=2&pageNumber=3`);
  t.deepEqual(
    lastPage.body.items.map((item: { rating: number }) => item.rating),
    [5],
  );
  t.is(lastPage.body.averageRating, 16 / 5, "the average covers every page");

  const ofFeature = await rest(server.baseUrl, "GET", `${RATINGS}?featureId=${feature.catalogId}`);
  t.like(ofFeature.body, { totalCount: 1, averageRating: 2 });
  const from = new Date(start + 2 * STEP).toISOString();
  const to = new Date(start + 4 * STEP).toISOString();
  const window = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${first.productId}&from=${from}&to=${to}`);
  t.deepEqual(
    window.body.items.map((item: { rating: number }) => item.rating),
    [4, 4],
    "from inclusive, to exclusive",
  );
  t.is(window.body.averageRating, 4);
  const none = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${crypto.randomUUID()}`);
  t.like(none.body, { totalCount: 0, averageRating: 0, items: [] });

  const scoped = await rest(server.baseUrl, "GET", RATINGS, undefined, {
    authorization: await bearerWithScopes(server, ["usage:read"]),
  });
  t.is(scoped.status, 200);
  t.true(scoped.body.totalCount >= 6);
  const unscoped = await rest(server.baseUrl, "GET", RATINGS, undefined, {
    authorization: await bearerWithScopes(server, ["catalog:read"]),
  });
  t.is(unscoped.status, 403);
  t.is((await rest(server.baseUrl, "GET", `${RATINGS}?productId=nope`)).status, 400);
  t.is((await rest(server.baseUrl, "GET", `${RATINGS}?from=${to}&to=${from}`)).status, 400);
});

each("another provider sees none of the ratings", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  t.is((await rate(server, session, { productId: session.productId, rating: 5 })).status, 200);
  const other = await createProviderWithClient(server);
  const authorization = `Bearer ${await accessToken(server.baseUrl, other.clientId, other.clientSecret)}`;
  const theirs = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${session.productId}`, undefined, {
    authorization,
  });
  t.is(theirs.status, 200);
  t.like(theirs.body, { totalCount: 0, averageRating: 0, items: [] });
  const ours = await rest(server.baseUrl, "GET", `${RATINGS}?productId=${session.productId}`);
  t.is(ours.body.totalCount, 1);
});
