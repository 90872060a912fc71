import http from "node:http";
import { usagePath } from "../test/support/metering.js";
import type { LicensedSession } from "../test/support/observability.js";
import type { LoadFigures, LoadOptions } from "./http-load.js";
import { loopFigures, loopFor } from "./timed-loop.js";
import { BATCH, METRIC } from "./usage-fixture.js";

/** What the ingest load was answered: batches and items accepted, answers that were not all accepted, failures. */
export interface IngestTally {
  batches: number;
  accepted: number;
  notAllAccepted: number;
  failures: number;
}

interface Answer {
  status: number;
  body: string;
}

/**
 * Usage ingest, closed loop: `connections` loops on keep-alive connections, each POSTing a batch of `BATCH` new
 * usage transactions (1 call each) as soon as its last was answered, over sessions of its own in turn (loop i:
 * sessions i, i + connections, …), whose transaction ids only increase. Timed as the raw INSERT loops are
 * (bench/timed-loop.ts): a loop sends nothing new after the deadline and its last batch is waited for, so no batch
 * left over from the warm-up runs into the measurement. Every answer is checked.
 */
export async function driveIngest(baseUrl: string, sessions: LicensedSession[], load: LoadOptions) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: load.connections });
  const nextIds = sessions.map(() => 1);
  const owned = Array.from({ length: load.connections }, (_, loop) => {
    const indexes = sessions.map((_, index) => index).filter((index) => index % load.connections === loop);
    return indexes.length > 0 ? indexes : [loop % sessions.length];
  });
  const turns = owned.map(() => 0);
  const tally: IngestTally = { batches: 0, accepted: 0, notAllAccepted: 0, failures: 0 };
  const send = async (loop: number) => {
    const index = owned[loop][turns[loop]++ % owned[loop].length];
    const firstId = nextIds[index];
    nextIds[index] += BATCH;
    const { sessionId, authorization } = sessions[index];
    count(tally, await post(agent, `${baseUrl}${usagePath(sessionId)}`, authorization, batch(firstId)));
  };
  try {
    if (load.warmupSeconds > 0) await loopFor(load.warmupSeconds, load.connections, send);
    const warmedUp = { ...tally };
    const measured = await loopFor(load.seconds, load.connections, send);
    const failures = tally.failures - warmedUp.failures;
    return { figures: { ...loopFigures(measured), failures } satisfies LoadFigures, tally };
  } finally {
    agent.destroy();
  }
}

function batch(firstId: number): string {
  const items: string[] = [];
  for (let id = firstId; id < firstId + BATCH; id++) {
    items.push(`{"transactionId":${id},"eventName":"${METRIC}","eventData":"1"}`);
  }
  return `[${items.join(",")}]`;
}

function count(tally: IngestTally, { status, body }: Answer): void {
  if (status !== 200) {
    tally.failures++;
    return;
  }
  const { acceptedCount, duplicateCount } = JSON.parse(body) as { acceptedCount: number; duplicateCount: number };
  tally.batches++;
  tally.accepted += acceptedCount;
  if (acceptedCount !== BATCH || duplicateCount !== 0) tally.notAllAccepted++;
}

/** One POST; a connection error answers status 0. */
function post(agent: http.Agent, url: string, authorization: string, body: string): Promise<Answer> {
  return new Promise((resolve) => {
    const headers = { authorization, "content-type": "application/json", "content-length": Buffer.byteLength(body) };
    const request = http.request(url, { method: "POST", headers, agent }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.once("end", () =>
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
      response.once("error", () => resolve({ status: 0, body: "" }));
    });
    request.setNoDelay(true);
    request.once("error", () => resolve({ status: 0, body: "" }));
    request.end(body);
  });
}
