/** One connection to make at start-up, and how to close it once made. */
export interface Connecting<T> {
  connect(): Promise<T>;
  close(connection: T): Promise<unknown>;
}

/**
 * Makes every connection at once (start-up then waits for the slowest, not for their sum) and answers them in
 * order. When any fails, those that connected are closed and the first failure, in the order given, is thrown.
 */
export async function connectAll<T extends unknown[]>(connections: { [K in keyof T]: Connecting<T[K]> }): Promise<T> {
  const all = connections as Connecting<unknown>[];
  const results = await Promise.allSettled(all.map((connection) => connection.connect()));
  const failure = results.find((result) => result.status === "rejected");
  if (!failure) return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as T;
  await Promise.all(
    results.map((result, index) =>
      result.status === "fulfilled" ? all[index].close(result.value).catch(() => undefined) : undefined,
    ),
  );
  throw failure.reason;
}
