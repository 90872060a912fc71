import test from "ava";
import { KeyedTurns } from "../../src/platform/keyed-turns.js";

/** A piece of work that runs until `finish` is called, recording when it started. */
function work(started: string[], name: string) {
  let finish = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    run: async () => {
      started.push(name);
      await finished;
      return name;
    },
    finish: () => finish(),
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test("one entitlement's transactions run two at a time, in arrival order; another's are not held up", async (t) => {
  const turns = new KeyedTurns(2);
  const started: string[] = [];
  const works = ["a1", "a2", "a3", "a4"].map((name) => work(started, name));
  const answers = works.map((each) => turns.run("a", each.run));
  const other = work(started, "b1");
  const otherAnswer = turns.run("b", other.run);
  await turn();
  t.deepEqual(started, ["a1", "a2", "b1"]);
  works[1].finish();
  await turn();
  t.deepEqual(started, ["a1", "a2", "b1", "a3"]);
  for (const each of works) each.finish();
  other.finish();
  t.deepEqual(await Promise.all(answers), ["a1", "a2", "a3", "a4"]);
  t.is(await otherAnswer, "b1");
  t.deepEqual(started, ["a1", "a2", "b1", "a3", "a4"]);
});

test("a transaction that fails hands its turn on", async (t) => {
  const turns = new KeyedTurns(2);
  const failing = () => Promise.reject(new Error("lock wait timeout"));
  await t.throwsAsync(Promise.all([turns.run("a", failing), turns.run("a", failing)]), { message: /lock wait/ });
  t.is(await turns.run("a", async () => "ran"), "ran");
});

test("with an overall bound, every key's work waits for a turn among all keys", async (t) => {
  const turns = new KeyedTurns(2, 3);
  const started: string[] = [];
  const keyed = [
    ["a", "a1"],
    ["a", "a2"],
    ["b", "b1"],
    ["b", "b2"],
    ["c", "c1"],
  ].map(([key, name]) => ({ key, work: work(started, name) }));
  const answers = keyed.map(({ key, work }) => turns.run(key, work.run));
  await turn();
  t.deepEqual(started, ["a1", "a2", "b1"]);
  keyed[0].work.finish();
  await turn();
  await turn();
  t.deepEqual(started, ["a1", "a2", "b1", "b2"], "the next in arrival order among all keys");
  for (const { work } of keyed) work.finish();
  t.deepEqual(await Promise.all(answers), ["a1", "a2", "b1", "b2", "c1"]);
  t.deepEqual(started, ["a1", "a2", "b1", "b2", "c1"]);
});
