import { execFile } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import test from "ava";
import { createLogger, RequestLineBatching, requestLogOf } from "../../src/platform/logger.js";
import { REPO_ROOT } from "../support/provision-process.js";

/** A destination that keeps every write it is given, as one string each. */
function capture() {
  const writes: string[] = [];
  return { writes, destination: { write: (text: string) => void writes.push(text) } };
}

function requestRecord(requestId: string) {
  return { requestId, method: "GET", path: "/healthz", status: 200, httpVersion: "1.1", durationMs: 0.5 };
}

function linesOf(writes: string[]): Record<string, unknown>[] {
  return writes
    .join("")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

test("request lines are held and written together; a record written meanwhile carries them in order", async (t) => {
  const { writes, destination } = capture();
  const batching = new RequestLineBatching(destination);
  const logger = createLogger("info", batching);
  const logRequest = requestLogOf(logger);
  logRequest(requestRecord("first"));
  logRequest(requestRecord("second"));
  t.deepEqual(writes, [], "nothing is written per request");
  logger.warn({ reason: "test" }, "a record");
  t.is(writes.length, 1, "the pending lines and the record go out in one write");
  t.deepEqual(
    linesOf(writes).map((line) => line.requestId ?? line.msg),
    ["first", "second", "a record"],
  );
});

test("a request line holds its fields exactly, whatever the path holds, and its duration to the microsecond", (t) => {
  const { writes, destination } = capture();
  const batching = new RequestLineBatching(destination);
  const logRequest = requestLogOf(createLogger("info", batching));
  const path = '/api/"quoted"/back\\slash/\u0001/\ud800/😀';
  logRequest({ ...requestRecord("awkward"), path, durationMs: 1.23456789 });
  batching.flushSync();
  const [line] = linesOf(writes);
  t.is(line.path, path);
  t.is(line.requestId, "awkward");
  t.is(line.durationMs, 1.235);
  t.is(line.httpVersion, "1.1");
  t.is(typeof line.time, "string");
  t.true(Math.abs(Date.parse(line.time as string) - Date.now()) < 5000);
});

test("request lines pending on their own are written within about 100 ms", async (t) => {
  const { writes, destination } = capture();
  const logRequest = requestLogOf(createLogger("info", new RequestLineBatching(destination)));
  logRequest(requestRecord("alone"));
  t.deepEqual(writes, []);
  const deadline = Date.now() + 2000;
  while (writes.length === 0 && Date.now() < deadline) await sleep(10);
  t.is(writes.length, 1);
  const [line] = linesOf(writes);
  t.is(line.requestId, "alone");
  t.is(line.msg, "request");
  t.is(line.status, 200);
});

test("64 KiB of pending request lines are written at once", (t) => {
  const { writes, destination } = capture();
  const logRequest = requestLogOf(createLogger("info", new RequestLineBatching(destination)));
  let sent = 0;
  while (writes.length === 0 && sent < 10_000) logRequest(requestRecord(`r${sent++}`));
  t.is(writes.length, 1, "written without waiting for the timer");
  t.true(writes[0].length >= 64 * 1024);
  t.is(linesOf(writes).length, sent, "every line logged so far");
});

test("request lines pending when the process exits are written before it ends", async (t) => {
  const script = `
    import { createLogger, requestLogOf, stdoutDestination } from "./src/platform/logger.ts";
    const logRequest = requestLogOf(createLogger("info", stdoutDestination()));
    for (let n = 0; n < 3; n++) logRequest({ requestId: "exiting-" + n, method: "GET", path: "/", status: 200, httpVersion: "1.1", durationMs: 1 });
    process.exit(0);
  `;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", script],
    { cwd: REPO_ROOT },
  );
  t.deepEqual(
    linesOf([stdout]).map((line) => line.requestId),
    ["exiting-0", "exiting-1", "exiting-2"],
  );
});
