import type { TestServer } from "./test-server.js";

/** Another transaction holding the rows `lockingSelect` locks, until `release`. */
export async function lockElsewhere(server: Pick<TestServer, "app">, lockingSelect: string, parameters: unknown[]) {
  const holder = server.app.dataSource.createQueryRunner();
  await holder.startTransaction();
  const rows = (await holder.query(lockingSelect, parameters)) as unknown[];
  if (rows.length === 0) throw new Error("nothing to lock");
  return {
    release: async () => {
      await holder.commitTransaction();
      await holder.release();
    },
  };
}

/**
 * Another transaction asking for the rows `lockingSelect` locks, queued behind whatever holds them: `granted`
 * resolves once it holds them, which it does until `release`.
 */
export function queueForLock(server: Pick<TestServer, "app">, lockingSelect: string, parameters: unknown[]) {
  const holder = server.app.dataSource.createQueryRunner();
  const granted = holder
    .startTransaction()
    .then(() => holder.query(lockingSelect, parameters))
    .then(() => undefined);
  return {
    granted,
    release: async () => {
      await granted;
      await holder.commitTransaction();
      await holder.release();
    },
  };
}

/** Resolves after `ms`: time for a request to reach a lock's queue. */
export function settle(ms = 300): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The requests, started at once, and how many have answered so far. */
export function counted<T>(requests: (() => Promise<T>)[]) {
  let answered = 0;
  const all = Promise.all(
    requests.map(async (request) => {
      const answer = await request();
      answered++;
      return answer;
    }),
  );
  return { all, answered: () => answered };
}

/** What `work` answers, or "stalled" when it has not answered within 20 s. */
export function unlessStalled<T>(work: Promise<T>): Promise<T | "stalled"> {
  const stalled = new Promise<"stalled">((resolve) => setTimeout(() => resolve("stalled"), 20_000).unref());
  return Promise.race([work, stalled]);
}
