import test from "ava";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer } from "../support/test-server.js";

const RACERS = 20;

test("20 concurrent identical creates yield exactly one product and 409 problems for the rest", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.close());
  const results = await Promise.all(
    Array.from({ length: RACERS }, () =>
      rest(server.baseUrl, "POST", PRODUCTS, { productCode: "RACE", productVersion: "1.0", name: "Race" }),
    ),
  );
  const statuses = results.map((result) => result.status).sort();
  t.deepEqual(statuses, [200, ...Array(RACERS - 1).fill(409)]);
  for (const conflict of results.filter((result) => result.status === 409)) {
    t.is(conflict.body.type, "urn:provision:problem:product-code-taken");
    t.is(conflict.headers.get("content-type"), "application/problem+json");
  }
  const listed = await rest(server.baseUrl, "GET", `${PRODUCTS}?filter=productCode=RACE`);
  t.is(listed.body.totalCount, 1);
});

test("concurrent updates of one product each count as a revision", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.close());
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "REVS" });
  const writers = 12;
  const results = await Promise.all(
    Array.from({ length: writers }, (_, index) =>
      rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, {
        propertyValues: { [`k${index}`]: { key: `k${index}`, value: String(index) } },
      }),
    ),
  );
  t.true(results.every((result) => result.status === 200));
  const after = await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
  t.is(after.body.revisionNumber, 1 + writers, "no lost update: every write is a revision");
  t.is(Object.keys(after.body.propertyValues).length, writers, "no lost update: every key is kept");
});
