import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import Database from "better-sqlite3";
import type { DataSource } from "typeorm";
import { openDatabase } from "../../src/app.js";
import { loadConfig } from "../../src/platform/config.js";
import { inTransaction, readSerially, writeSerially } from "../../src/platform/database.js";

// The embedded database's writes queued behind one another share one commit, each in a savepoint of its own, and
// are answered once that commit is on disk. Observed from a second connection to the same file, as another
// process would see it.
const test = anyTest as TestFn<{ dataSource: DataSource; observer: Database.Database; folder: string }>;

test.beforeEach(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-commit-queue-"));
  const file = path.join(folder, "p.sqlite");
  const dataSource = await openDatabase(loadConfig({ DATABASE_URL: `sqlite:${file}` })).initialize();
  await dataSource.query("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)");
  Object.assign(t.context, { dataSource, observer: new Database(file, { readonly: true }), folder });
});

test.afterEach.always(async (t) => {
  t.context.observer?.close();
  await t.context.dataSource?.destroy();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function insert(dataSource: DataSource, name: string) {
  return inTransaction(dataSource, async (manager) => {
    await manager.query("INSERT INTO items (name) VALUES (?)", [name]);
    return name;
  });
}

function namesSeenBy(observer: Database.Database): string[] {
  return (observer.prepare("SELECT name FROM items ORDER BY id").all() as { name: string }[]).map((row) => row.name);
}

/** How many commits of another connection the observer has seen (SQLite's data_version moves once per commit). */
function commitsSeenBy(observer: Database.Database): number {
  return observer.pragma("data_version", { simple: true }) as number;
}

test("writes queued together are each answered once committed, and share commits", async (t) => {
  const { dataSource, observer } = t.context;
  const before = commitsSeenBy(observer);
  const names = Array.from({ length: 40 }, (_, index) => `item-${index}`);
  const answered = await Promise.all(
    names.map((name) =>
      insert(dataSource, name).then((value) => {
        t.true(namesSeenBy(observer).includes(name), `${name} is on disk when answered`);
        return value;
      }),
    ),
  );
  t.deepEqual(answered, names);
  t.deepEqual(namesSeenBy(observer), names);
  const commits = commitsSeenBy(observer) - before;
  t.true(commits >= 1 && commits < names.length, `${commits} commits for ${names.length} writes`);
});

test("a failed write is undone alone: the writes queued around it commit", async (t) => {
  const { dataSource, observer } = t.context;
  const [first, duplicate, failing, last] = await Promise.allSettled([
    insert(dataSource, "a"),
    insert(dataSource, "a"),
    inTransaction(dataSource, async (manager) => {
      await manager.query("INSERT INTO items (name) VALUES ('b')");
      throw new Error("the write fails after its first statement");
    }),
    insert(dataSource, "c"),
  ]);
  t.is(first.status, "fulfilled");
  t.is(duplicate.status, "rejected");
  t.is(failing.status, "rejected");
  t.is(last.status, "fulfilled");
  t.deepEqual(namesSeenBy(observer), ["a", "c"]);
});

test("a read queued behind a write sees it; one queued alone runs with no transaction left open", async (t) => {
  const { dataSource, observer } = t.context;
  const [, seen] = await Promise.all([
    insert(dataSource, "x"),
    readSerially(dataSource, () => dataSource.query("SELECT name FROM items")),
  ]);
  t.deepEqual(seen, [{ name: "x" }]);
  await readSerially(dataSource, () => dataSource.query("SELECT 1"));
  t.false(dataSource.createQueryRunner().isTransactionActive);
  t.deepEqual(namesSeenBy(observer), ["x"]);
});

test("when SQLite drops the shared transaction, every write in it fails and later writes still commit", async (t) => {
  const { dataSource, observer } = t.context;
  const [kept, dropping] = await Promise.allSettled([
    insert(dataSource, "lost"),
    writeSerially(dataSource, async () => {
      // What SQLite does to the whole transaction after an I/O error or a full disk.
      await dataSource.query("ROLLBACK");
      throw new Error("disk I/O error");
    }),
  ]);
  t.is(kept.status, "rejected", "a write is never answered as done when its commit did not happen");
  t.is(dropping.status, "rejected");
  t.is(await insert(dataSource, "after"), "after");
  t.deepEqual(namesSeenBy(observer), ["after"]);
});
