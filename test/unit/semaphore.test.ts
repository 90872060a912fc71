import test from "ava";
import { Semaphore } from "../../src/platform/semaphore.js";

const turn = () => new Promise((resolve) => setImmediate(resolve));

test("work runs at most atOnce at a time, the rest in arrival order; a failure hands its turn on", async (t) => {
  const semaphore = new Semaphore(2);
  const started: number[] = [];
  const finishers: (() => void)[] = [];
  const answers = [0, 1, 2, 3].map((index) =>
    semaphore.run(async () => {
      started.push(index);
      await new Promise<void>((resolve) => finishers.push(resolve));
      if (index === 1) throw new Error("failed");
      return index;
    }),
  );
  await turn();
  t.deepEqual(started, [0, 1]);
  finishers[1]();
  await t.throwsAsync(answers[1], { message: "failed" });
  await turn();
  t.deepEqual(started, [0, 1, 2]);
  finishers[0]();
  await turn();
  t.deepEqual(started, [0, 1, 2, 3]);
  finishers[2]();
  finishers[3]();
  t.deepEqual(await Promise.all([answers[0], answers[2], answers[3]]), [0, 2, 3]);
  t.is(await semaphore.run(async () => "free again"), "free again");
});
