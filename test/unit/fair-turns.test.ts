import test from "ava";
import { FairTurns } from "../../src/platform/fair-turns.js";

/** Work that ends when `finish` is called, recording when it started. */
function manualWork(started: string[], name: string) {
  let finish = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    work: async () => {
      started.push(name);
      await done;
    },
    finish: () => finish(),
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test("one key's burst holds another key's work up by one turn, not by the whole burst", async (t) => {
  const turns = new FairTurns(1);
  const started: string[] = [];
  const burst = Array.from({ length: 10 }, (_, index) => manualWork(started, `a${index}`));
  const runs = burst.map(({ work }) => turns.run("attacker", work));
  const other = manualWork(started, "b0");
  const otherRun = turns.run("someone else", other.work);
  await settle();
  t.deepEqual(started, ["a0"], "one at a time");
  burst[0].finish();
  await settle();
  t.deepEqual(started, ["a0", "a1"], "the attacker's next was waiting first");
  burst[1].finish();
  await settle();
  t.deepEqual(started, ["a0", "a1", "b0"], "then the other key's turn, ahead of the rest of the burst");
  other.finish();
  for (const { finish } of burst.slice(2)) {
    await settle();
    finish();
  }
  await Promise.all([...runs, otherRun]);
  t.deepEqual(started.slice(3), ["a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"], "each key's own work in order");
});

test("up to atOnce run together, and a failure frees its turn", async (t) => {
  const turns = new FairTurns(2);
  let running = 0;
  let most = 0;
  const job = async () => {
    running++;
    most = Math.max(most, running);
    await settle();
    running--;
  };
  await t.throwsAsync(turns.run("k", async () => Promise.reject(new Error("failed"))));
  await Promise.all(Array.from({ length: 9 }, (_, index) => turns.run(`k${index % 3}`, job)));
  t.is(most, 2);
});
