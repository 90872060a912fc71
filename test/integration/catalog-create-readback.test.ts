import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// A create is one prepared INSERT on MySQL (binary parameters) while reads are text queries: a local time
// zone far from UTC shows any instant the two would store or read differently.
process.env.TZ = "Pacific/Kiritimati";

const test = anyTest as TestFn<{ servers: Record<string, TestServer> }>;

test.before(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-create-readback-"));
  t.context.servers = {
    MySQL: await startTestServer(),
    SQLite: await startTestServer({ embedded: { file: path.join(folder, "provision.sqlite") } }),
  };
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
});

for (const database of ["MySQL", "SQLite"]) {
  test(`${database}: a created product reads back exactly as the create answered it`, async (t) => {
    t.not(new Date().getTimezoneOffset(), 0, "the process runs in a time zone other than UTC");
    const { baseUrl } = t.context.servers[database];
    const created = await rest(baseUrl, "POST", PRODUCTS, {
      productCode: " READBACK-ü-😀 ",
      productVersion: "2.0",
      name: "Ünïcode 'quoted' \\ name",
      description: "",
      externalId: "ext-1",
    });
    t.is(created.status, 200);
    const read = await rest(baseUrl, "GET", `${PRODUCTS}/${created.body.id}`);
    t.deepEqual(read.body, created.body);
    t.is(read.body.productCode, "READBACK-ü-😀");
    t.true(Math.abs(Date.parse(read.body.createdAt) - Date.now()) < 60_000, read.body.createdAt);
  });
}
