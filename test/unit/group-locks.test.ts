import test from "ava";
import { GroupLocks } from "../../src/licensing/group-locks.js";

const turn = () => new Promise((resolve) => setImmediate(resolve));

test("a group takes its turn once the group before it holds its locks, and waits only for those", async (t) => {
  const locks = new GroupLocks();
  const first = await locks.next();
  let secondReady = false;
  const second = locks.next().then((next) => {
    secondReady = true;
    return next;
  });
  await turn();
  t.false(secondReady, "the second waits while the first has not locked");
  first.locking.locked(["x", "y"]);
  const { locking, release } = await second;
  t.true(locking.waitsFor("x"));
  t.false(locking.waitsFor("z"), "an entitlement no group of this instance holds is passed over when held");
  first.release();
  t.false(locking.waitsFor("x"), "once the first has ended, nothing of it is waited for");
  release();
});

test("a group that ends before locking lets the next one go", async (t) => {
  const locks = new GroupLocks();
  const first = await locks.next();
  first.release();
  const second = await locks.next();
  t.false(second.locking.waitsFor("x"));
});

test("a group run again after a deadlock holds what it locked last", async (t) => {
  const locks = new GroupLocks();
  const first = await locks.next();
  first.locking.locked(["x"]);
  t.false(first.locking.waitsFor("x"), "a group run again does not wait for what its rolled-back run held");
  first.locking.locked(["y"]);
  const second = await locks.next();
  t.false(second.locking.waitsFor("x"));
  t.true(second.locking.waitsFor("y"));
});
