import test from "ava";
import { GroupCommit } from "../../src/platform/group-commit.js";

/** A write whose calls a test sees and finishes one at a time. */
function heldWrite() {
  const calls: { jobs: number[]; finish(error?: Error): void }[] = [];
  const write = (jobs: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      calls.push({
        jobs,
        finish: (error) => (error ? reject(error) : resolve(jobs.map((job) => job * 10))),
      });
    });
  return { calls, write };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test("jobs submitted while a write is in flight are written next, together, each answered its own result", async (t) => {
  const { calls, write } = heldWrite();
  const groups = new GroupCommit(write, { weigh: () => 1, maxWeight: 100, maxInFlight: 1 });
  const first = groups.submit(1);
  const waiting = [groups.submit(2), groups.submit(3), groups.submit(4)];
  await settle();
  t.deepEqual(
    calls.map((call) => call.jobs),
    [[1]],
    "one write at a time",
  );
  calls[0].finish();
  t.is(await first, 10);
  await settle();
  t.deepEqual(calls[1].jobs, [2, 3, 4]);
  calls[1].finish();
  t.deepEqual(await Promise.all(waiting), [20, 30, 40]);
});

test("a failed write fails every job of its group, and the next group is written still", async (t) => {
  const { calls, write } = heldWrite();
  const groups = new GroupCommit(write, { weigh: () => 1, maxWeight: 100, maxInFlight: 1 });
  const first = groups.submit(1);
  const failing = [groups.submit(2), groups.submit(3)];
  const outcomes = Promise.allSettled(failing);
  await settle();
  calls[0].finish();
  await first;
  await settle();
  const later = groups.submit(4);
  calls[1].finish(new Error("deadlock"));
  t.deepEqual(
    (await outcomes).map((outcome) => (outcome.status === "rejected" ? (outcome.reason as Error).message : "ok")),
    ["deadlock", "deadlock"],
  );
  await settle();
  t.deepEqual(calls[2].jobs, [4]);
  calls[2].finish();
  t.is(await later, 40);
});

test("a group stops before the job that would pass the weight limit; a heavier job goes alone", async (t) => {
  const { calls, write } = heldWrite();
  const groups = new GroupCommit(write, { weigh: (job: number) => job, maxWeight: 10, maxInFlight: 1 });
  const all = [groups.submit(1), groups.submit(4), groups.submit(5), groups.submit(2), groups.submit(30)];
  for (let round = 0; round < 4; round++) {
    await settle();
    calls[round].finish();
  }
  await Promise.all(all);
  t.deepEqual(
    calls.map((call) => call.jobs),
    [[1], [4, 5], [2], [30]],
  );
});

test("with two write slots, two jobs are written at once and the jobs arriving meanwhile wait for a free slot", async (t) => {
  const { calls, write } = heldWrite();
  const groups = new GroupCommit(write, { weigh: () => 1, maxWeight: 100, maxInFlight: 2 });
  const all = [1, 2, 3, 4, 5].map((job) => groups.submit(job));
  await settle();
  t.deepEqual(
    calls.map((call) => call.jobs),
    [[1], [2]],
  );
  calls[1].finish();
  await settle();
  t.deepEqual(calls[2].jobs, [3, 4, 5], "the freed slot takes every waiting job");
  calls[0].finish();
  calls[2].finish();
  t.deepEqual(await Promise.all(all), [10, 20, 30, 40, 50]);
});

test("with gatherTurns, jobs submitted in one turn of the event loop share a write even when none is in flight", async (t) => {
  const groupsWritten: number[][] = [];
  // A write that never yields before it finishes, as SQLite's driver does.
  const write = async (jobs: number[]) => {
    groupsWritten.push(jobs);
    return jobs.map((job) => job * 10);
  };
  const gathering = new GroupCommit(write, { weigh: () => 1, maxWeight: 100, maxInFlight: 1, gatherTurns: 1 });
  t.deepEqual(await Promise.all([1, 2, 3].map((job) => gathering.submit(job))), [10, 20, 30]);
  t.deepEqual(groupsWritten, [[1, 2, 3]]);
  t.deepEqual(await gathering.submit(4), 40, "a job alone in its turn is written alone");
  t.deepEqual(groupsWritten, [[1, 2, 3], [4]]);

  groupsWritten.length = 0;
  const eager = new GroupCommit(write, { weigh: () => 1, maxWeight: 100, maxInFlight: 1 });
  await Promise.all([1, 2, 3].map((job) => eager.submit(job)));
  t.deepEqual(groupsWritten, [[1], [2, 3]], "without it the first job is written at once, alone");
});

/** Turns stepped by hand: what the group commit runs at the end of a turn waits until `endTurn`. */
function manualTurns() {
  const queued: (() => void)[] = [];
  return {
    endOfTurn: (next: () => void) => queued.push(next),
    endTurn: () => {
      for (const next of queued.splice(0)) next();
    },
  };
}

test("a group keeps gathering while each turn brings jobs, up to gatherTurns turns or its weight", async (t) => {
  const groupsWritten: number[][] = [];
  const write = async (jobs: number[]) => {
    groupsWritten.push(jobs);
    return jobs.map((job) => job * 10);
  };
  const turns = manualTurns();
  const options = { weigh: () => 1, maxInFlight: 1, gatherTurns: 3, endOfTurn: turns.endOfTurn };
  const upToThree = new GroupCommit(write, { ...options, maxWeight: 100 });
  const answers = [upToThree.submit(1), upToThree.submit(2)];
  turns.endTurn();
  answers.push(upToThree.submit(3));
  turns.endTurn();
  answers.push(upToThree.submit(4));
  turns.endTurn();
  t.deepEqual(groupsWritten, [[1, 2, 3, 4]], "three turns, each bringing jobs, share one write");
  answers.push(upToThree.submit(5));
  turns.endTurn();
  t.deepEqual(await Promise.all(answers), [10, 20, 30, 40, 50]);
  t.deepEqual(groupsWritten, [[1, 2, 3, 4], [5]], "a turn that brings nothing more ends the gathering");

  groupsWritten.length = 0;
  const light = new GroupCommit(write, { ...options, maxWeight: 2 });
  const lightAnswers = [light.submit(1), light.submit(2)];
  turns.endTurn();
  t.deepEqual(groupsWritten, [[1, 2]], "a group as heavy as it may be is written without another turn");
  lightAnswers.push(light.submit(3));
  turns.endTurn();
  await Promise.all(lightAnswers);
  t.deepEqual(groupsWritten, [[1, 2], [3]]);
});
