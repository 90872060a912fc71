import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ExecutionContext } from "ava";
import type { DatabaseConfig } from "../../src/platform/config.js";
import { createTestDatabase, startTestServer } from "./test-server.js";

export type DatabaseMode = "MySQL" | "SQLite";

/** A database of this mode, dropped after the test, and how a test server opens it. */
export async function freshDatabase(t: ExecutionContext, mode: DatabaseMode) {
  if (mode === "MySQL") {
    const database = await createTestDatabase();
    t.teardown(() => database.drop());
    const config: DatabaseConfig = { kind: "mysql", url: database.url };
    return { config, serve: () => startTestServer({ databaseUrl: database.url }) };
  }
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-migration-"));
  t.teardown(() => fs.rmSync(folder, { recursive: true, force: true }));
  const file = path.join(folder, "provision.sqlite");
  const config: DatabaseConfig = { kind: "sqlite", file };
  return { config, serve: () => startTestServer({ embedded: { file } }) };
}
