import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test, { type ExecutionContext } from "ava";
import { catalogEntities } from "../../src/catalog/entities.js";
import { licensingEntities } from "../../src/licensing/entities.js";
import { SessionStore } from "../../src/licensing/session-store.js";
import type { DatabaseConfig } from "../../src/platform/config.js";
import { createDataSource, migrate } from "../../src/platform/database.js";
import { migrations } from "../../src/platform/migrations/index.js";
import { createTestDatabase } from "../support/test-server.js";

const ENTITLEMENT_ID = "00000000-0000-4000-8000-0000000000e1";

async function migrated(t: ExecutionContext, config: DatabaseConfig) {
  const dataSource = await createDataSource(
    config,
    [...catalogEntities, ...licensingEntities],
    migrations,
  ).initialize();
  t.teardown(() => dataSource.destroy());
  await migrate(dataSource);
  return dataSource;
}

/** An activation's floating-seat count reads the seats index alone: no row read per live session it counts. */
test("MySQL: the floating-seat count is answered from the seats index alone", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const dataSource = await migrated(t, { kind: "mysql", url: database.url });
  const { sql, parameters } = new SessionStore(dataSource).liveFloatingSessionsStatement(ENTITLEMENT_ID, new Date());
  const [plan] = (await dataSource.query(`EXPLAIN ${sql}`, parameters)) as { key: string; Extra: string }[];
  t.is(plan.key, "ix_license_sessions_seats");
  t.regex(plan.Extra, /Using index(?! condition)/);
});

test("SQLite: the floating-seat count is answered from the seats index alone", async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-seat-index-"));
  t.teardown(() => fs.rmSync(folder, { recursive: true, force: true }));
  const dataSource = await migrated(t, { kind: "sqlite", file: path.join(folder, "provision.sqlite") });
  const { sql, parameters } = new SessionStore(dataSource).liveFloatingSessionsStatement(ENTITLEMENT_ID, new Date());
  const plan = (await dataSource.query(`EXPLAIN QUERY PLAN ${sql}`, parameters)) as { detail: string }[];
  t.true(
    plan.some((step) => step.detail.includes("USING COVERING INDEX ix_license_sessions_seats")),
    JSON.stringify(plan),
  );
});
