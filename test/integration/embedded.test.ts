import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import test from "ava";
import { CatalogService } from "../../gen/provision/v1/catalog_pb.js";
import { sendAuthorization } from "../support/credentials.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer } from "../support/test-server.js";

function temporaryFile(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-embedded-"));
  return path.join(directory, "provision.sqlite");
}

test("the embedded mode serves the catalog on SQLite with the in-process coordinator", async (t) => {
  const file = temporaryFile();
  const server = await startTestServer({ embedded: { file } });
  t.teardown(() => server.close());
  t.is(server.app.coordinator.kind, "memory");
  t.is(server.app.dataSource.options.type, "better-sqlite3");

  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "EMB-1", productVersion: "1" });
  t.is(created.status, 200);
  t.is((await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "EMB-1", productVersion: "2" })).status, 409);
  const feature = await rest(server.baseUrl, "POST", `${PRODUCTS}/${created.body.id}/features`, { featureCode: "f1" });
  t.is(feature.status, 200);
  const updated = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, {
    name: "Embedded",
    expirationDate: "2030-01-01T00:00:00Z",
  });
  t.like(updated.body, { name: "Embedded", revisionNumber: 3, expirationDate: "2030-01-01T00:00:00Z" });
  const listed = await rest(
    server.baseUrl,
    "GET",
    `${PRODUCTS}?filter=${encodeURIComponent("expirationDate>2029-12-31")}`,
  );
  t.deepEqual(
    listed.body.items.map((item: { productCode: string }) => item.productCode),
    ["EMB-1"],
  );

  const grpc = createClient(
    CatalogService,
    createGrpcTransport({ baseUrl: server.baseUrl, interceptors: [sendAuthorization(server.adminAuthorization)] }),
  );
  const viaGrpc = await grpc.listProducts({});
  t.is(viaGrpc.totalCount, 1);
  t.true(fs.existsSync(file));
  const ready = await fetch(`${server.baseUrl}/readyz`);
  t.is(ready.status, 200);
});

test("20 concurrent identical creates yield one product on SQLite too", async (t) => {
  const server = await startTestServer({ embedded: { file: temporaryFile() } });
  t.teardown(() => server.close());
  const results = await Promise.all(
    Array.from({ length: 20 }, () => rest(server.baseUrl, "POST", PRODUCTS, { productCode: "EMB-RACE" })),
  );
  t.deepEqual(results.map((result) => result.status).sort(), [200, ...Array(19).fill(409)]);
});

test("data survives a restart of the embedded service", async (t) => {
  const file = temporaryFile();
  const first = await startTestServer({ embedded: { file } });
  await rest(first.baseUrl, "POST", PRODUCTS, { productCode: "KEEP" });
  await first.close();
  const second = await startTestServer({ embedded: { file } });
  t.teardown(() => second.close());
  const listed = await rest(second.baseUrl, "GET", `${PRODUCTS}?filter=productCode=KEEP`);
  t.is(listed.body.totalCount, 1);
});

test("concurrent writes on SQLite keep every transaction whole: no lost update, no shared rollback", async (t) => {
  const server = await startTestServer({ embedded: { file: temporaryFile() } });
  t.teardown(() => server.close());
  const created = await rest(server.baseUrl, "POST", PRODUCTS, { productCode: "EMB-REVS" });
  const writers = 12;
  const results = await Promise.all([
    ...Array.from({ length: writers }, (_, index) =>
      rest(server.baseUrl, "PUT", `${PRODUCTS}/${created.body.id}`, {
        propertyValues: { [`k${index}`]: { key: `k${index}`, value: String(index) } },
      }),
    ),
    // Imports that fail inside their transaction (the second product reuses a taken id) race the updates:
    // their rollback must not take any update with it.
    ...Array.from({ length: 4 }, (_, index) =>
      rest(server.baseUrl, "POST", `${PRODUCTS}/import`, [
        { productCode: `EMB-NEW-${index}` },
        { productCode: `EMB-CLASH-${index}`, id: created.body.id },
      ]),
    ),
  ]);
  t.deepEqual(
    results.map((result) => result.status),
    [...Array(writers).fill(200), ...Array(4).fill(409)],
  );
  const after = await rest(server.baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
  t.is(after.body.revisionNumber, 1 + writers);
  t.is(Object.keys(after.body.propertyValues).length, writers);
  const leftovers = await rest(server.baseUrl, "GET", `${PRODUCTS}?filter=productCode~EMB-NEW`);
  t.is(leftovers.body.totalCount, 0, "nothing of a failed import is kept");
});
