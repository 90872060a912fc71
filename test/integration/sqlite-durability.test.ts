import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test from "ava";
import { openDatabase } from "../../src/app.js";
import { loadConfig } from "../../src/platform/config.js";

// better-sqlite3's SQLite is built to open a database already in WAL mode at `synchronous = NORMAL`, where a
// commit is not flushed to disk: a restart must not leave the embedded database less durable than its first start.
test("the embedded database commits durably (synchronous FULL, WAL) on its first start and after a restart", async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-sqlite-durability-"));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  const config = loadConfig({ DATABASE_URL: `sqlite:${path.join(directory, "p.sqlite")}` });
  for (const start of ["first start", "restart"]) {
    const dataSource = await openDatabase(config).initialize();
    t.deepEqual(await dataSource.query("PRAGMA journal_mode"), [{ journal_mode: "wal" }], start);
    t.deepEqual(await dataSource.query("PRAGMA synchronous"), [{ synchronous: 2 }], start);
    await dataSource.destroy();
  }
});
