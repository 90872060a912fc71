import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import type { RecordLogsResponse } from "../../gen/provision/v1/observability_pb.js";
import { ObservabilityService, RecordLogsRequestSchema } from "../../gen/provision/v1/observability_pb.js";
import { UsageAdminService } from "../../gen/provision/v1/usage_admin_pb.js";
import { accessToken } from "../support/auth.js";
import { authorizationMetadata, bearerWithScopes, sendAuthorization } from "../support/credentials.js";
import { grpcClient } from "../support/grpc-client.js";
import { sessionCall } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { licensedSession, recordPath, sendRecords, sessionRecordsPath } from "../support/observability.js";
import { createProviderWithClient } from "../support/providers.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];

interface Context {
  servers: Record<Mode, { server: TestServer; clock: ManualClock }>;
  folder: string;
}
const test = anyTest as TestFn<Context>;

const START = Date.parse("2026-03-01T12:00:00Z");
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-observability-"));
  t.context.servers = {} as Context["servers"];
  for (const mode of MODES) {
    const clock = manualClock(START);
    const server = await startTestServer({
      clock,
      ...(mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {}),
    });
    t.context.servers[mode] = { server, clock };
  }
});

test.after.always(async (t) => {
  for (const { server } of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

function listRecords(server: TestServer, sessionId: string, kind: "logs" | "metrics", query = "") {
  return rest(server.baseUrl, "GET", `${sessionRecordsPath(sessionId, kind)}${query}`);
}

const log = (transactionId: number, level: string, message: string, atMs?: number) => ({
  transactionId,
  eventName: level,
  eventData: message,
  ...(atMs === undefined ? {} : { creationDateTime: iso(atMs) }),
});

each("log entries are stored, a replayed batch counts once, and they list back newest first", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const t0 = clock.now().getTime();
  const batch = [
    log(1, "INFO", "started", t0 - 3 * MINUTE),
    log(2, "warn", "disk almost full", t0 - 2 * MINUTE),
    log(3, "Error", '{"message":"write failed","code":28}', t0 - MINUTE),
    log(0, "debug", "no transaction id"),
  ];
  const first = await sendRecords(server.baseUrl, session, "log", batch);
  t.is(first.status, 200, JSON.stringify(first.body));
  t.deepEqual(first.body, { acceptedCount: 4 });

  clock.advance(1000);
  const replay = await sendRecords(server.baseUrl, session, "log", batch);
  t.deepEqual(replay.body, { acceptedCount: 1 }, "only the item without a transactionId is stored again");
  clock.advance(1000);
  const repeatedInBatch = await sendRecords(server.baseUrl, session, "log", [
    log(4, "info", "once"),
    log(4, "info", "twice"),
  ]);
  t.deepEqual(repeatedInBatch.body, { acceptedCount: 1 }, "a transactionId repeated within one batch counts once");

  const all = await listRecords(server, session.sessionId, "logs");
  t.is(all.status, 200, JSON.stringify(all.body));
  t.is(all.body.totalCount, 6);
  t.deepEqual(
    all.body.items.map((item: { eventName: string; transactionId: string }) => [item.eventName, item.transactionId]),
    [
      ["info", "4"],
      ["debug", "0"],
      ["debug", "0"],
      ["error", "3"],
      ["warn", "2"],
      ["info", "1"],
    ],
    "newest first; levels stored lower case; unset creationDateTime = when received",
  );
  const error = all.body.items[3];
  t.is(error.eventData, '{"message":"write failed","code":28}');
  t.is(error.sessionId, session.sessionId);
  t.is(Date.parse(error.occurredAt), t0 - MINUTE);
  t.is(Date.parse(error.recordedAt), t0);
  t.is(Date.parse(all.body.items[0].occurredAt), t0 + 2000);

  const errors = await listRecords(server, session.sessionId, "logs", "?level=ERROR");
  t.deepEqual(
    errors.body.items.map((item: { eventData: string }) => item.eventData),
    ['{"message":"write failed","code":28}'],
  );
  const window = await listRecords(
    server,
    session.sessionId,
    "logs",
    `?from=${iso(t0 - 3 * MINUTE)}&to=${iso(t0 - MINUTE)}`,
  );
  t.deepEqual(
    window.body.items.map((item: { transactionId: string }) => item.transactionId),
    ["2", "1"],
    "from is inclusive, to exclusive",
  );
  const second = await listRecords(server, session.sessionId, "logs", "?pageSize=4&pageNumber=2");
  t.like(second.body, { currentPage: 2, pageSize: 4, totalCount: 6, totalPages: 2, from: 5, to: 6 });
  t.like(second.body, { hasPreviousPage: true, hasNextPage: false });
  t.deepEqual(
    second.body.items.map((item: { transactionId: string }) => item.transactionId),
    ["2", "1"],
  );
});

each("transactionIds beyond 2^53 keep every digit", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const big = "9007199254740993123";
  const sent = await rest(
    server.baseUrl,
    "POST",
    recordPath(session.sessionId, "log"),
    [{ transactionId: big, eventName: "info", eventData: "x" }],
    { authorization: session.authorization },
  );
  t.deepEqual(sent.body, { acceptedCount: 1 });
  const again = await sendRecords(server.baseUrl, session, "log", [
    { transactionId: big, eventName: "info", eventData: "y" },
  ]);
  t.deepEqual(again.body, { acceptedCount: 0 });
  const listed = await listRecords(server, session.sessionId, "logs");
  t.is(listed.body.items[0].transactionId, big);
});

each("text that is not well-formed (a lone surrogate) is refused, not stored altered", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const refused = await sendRecords(server.baseUrl, session, "log", [
    { transactionId: 1, eventName: "info", eventData: "half a pair: \ud800" },
  ]);
  t.is(refused.status, 400, JSON.stringify(refused.body));
  t.is((await listRecords(server, session.sessionId, "logs")).body.totalCount, 0);
});

each("metric samples take a number or {value, unit, tags} under a metric name", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const samples = [
    { transactionId: 1, eventName: "cpu.percent", eventData: "42.5" },
    {
      transactionId: 2,
      eventName: "memory/used",
      eventData: JSON.stringify({ value: 512, unit: "MiBy", tags: { host: "a", cores: 4, primary: true } }),
    },
    { transactionId: 3, eventName: "cpu.percent", eventData: "43" },
  ];
  const sent = await sendRecords(server.baseUrl, session, "metrics", samples);
  t.deepEqual(sent.body, { acceptedCount: 3 });
  const cpu = await listRecords(server, session.sessionId, "metrics", "?name=cpu.percent");
  t.is(cpu.status, 200);
  t.deepEqual(
    cpu.body.items.map((item: { eventData: string }) => item.eventData),
    ["43", "42.5"],
  );
  t.is((await listRecords(server, session.sessionId, "metrics")).body.totalCount, 3);

  const invalid: [string, string, string][] = [
    ["", "1", "eventName"],
    ["9lives", "1", "eventName"],
    ["cpu percent", "1", "eventName"],
    ["m".repeat(129), "1", "eventName"],
    ["cpu", "fast", "eventData"],
    ["cpu", '"42"', "eventData"],
    ["cpu", "1e400", "eventData"],
    ["cpu", '{"value":"42"}', "eventData"],
    ["cpu", '{"value":1,"note":"x"}', "eventData"],
    ["cpu", '{"value":1,"tags":{"a":[1]}}', "eventData"],
    ["cpu", `{"value":1,"unit":"${"u".repeat(64)}"}`, "eventData"],
    ["cpu", `{"value":1,"tags":{"t":"${"x".repeat(1000)}"}}`, "eventData"],
  ];
  for (const [eventName, eventData, field] of invalid) {
    const refused = await sendRecords(server.baseUrl, session, "metrics", [{ eventName, eventData }]);
    t.is(refused.status, 400, `${eventName} ${eventData}`);
    t.deepEqual(
      refused.body.errors.map((error: { field: string }) => error.field),
      [`events[0].${field}`],
    );
  }
  t.is((await listRecords(server, session.sessionId, "metrics")).body.totalCount, 3, "nothing refused was stored");
});

each("a batch with one invalid item is refused whole, naming the item", async (t, mode) => {
  const { server, clock } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  const now = clock.now().getTime();
  const refusals: [unknown, string][] = [
    [log(2, "info", "from the future", now + 5 * MINUTE + 1000), "events[1].creationDateTime"],
    [{ ...log(2, "info", "x"), sessionId: crypto.randomUUID() }, "events[1].sessionId"],
    [log(2, "notice", "x"), "events[1].eventName"],
    [log(2, "info", "é".repeat(4097)), "events[1].eventData"],
    [{ ...log(2, "info", "x"), apiVersion: 2 }, "events[1].apiVersion"],
    [log(-2, "info", "x"), "events[1].transactionId"],
  ];
  for (const [item, field] of refusals) {
    const refused = await sendRecords(server.baseUrl, session, "log", [log(1, "info", "fine"), item]);
    t.is(refused.status, 400, field);
    t.is(refused.body.type, "urn:provision:problem:validation");
    t.deepEqual(
      refused.body.errors.map((error: { field: string }) => error.field),
      [field],
    );
  }
  t.is((await listRecords(server, session.sessionId, "logs")).body.totalCount, 0, "nothing of a refused batch");

  const limits = [
    log(1, "info", "x".repeat(8192)),
    log(2, "info", "in five minutes", now + 5 * MINUTE),
    { ...log(3, "info", "own session"), sessionId: session.sessionId },
  ];
  const accepted = await sendRecords(server.baseUrl, session, "log", limits);
  t.deepEqual(accepted.body, { acceptedCount: 3 }, "8 KiB of data and five minutes ahead are allowed");
  const tooMany = await sendRecords(server.baseUrl, session, "log", Array(1001).fill(log(0, "info", "x")));
  t.is(tooMany.status, 413, "a batch over its cap is too large");
});

each("a token is accepted only on its own session, and not once the session is released", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const mine = await licensedSession(server.baseUrl, "device-a");
  const other = await licensedSession(server.baseUrl, "device-b");
  const wrong = await sendRecords(server.baseUrl, mine, "log", [log(1, "info", "x")], other.sessionId);
  t.is(wrong.status, 403);
  t.is(wrong.body.type, "urn:provision:problem:wrong-session");
  const anonymous = await rest(server.baseUrl, "POST", recordPath(mine.sessionId, "metrics"), [], {
    authorization: "",
  });
  t.is(anonymous.status, 401);
  t.is((await listRecords(server, other.sessionId, "logs")).body.totalCount, 0);

  const released = await sessionCall(server.baseUrl, mine.authorization.slice(7), "release");
  t.is(released.status, 200);
  const afterRelease = await sendRecords(server.baseUrl, mine, "metrics", [{ eventName: "cpu", eventData: "1" }]);
  t.is(afterRelease.status, 401);
  t.is(afterRelease.body.type, "urn:provision:problem:session-released");
});

each("the lists need usage:read, validate their filters, and hide other providers' sessions", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const session = await licensedSession(server.baseUrl);
  await sendRecords(server.baseUrl, session, "log", [log(1, "info", "mine")]);
  const other = await createProviderWithClient(server);
  const otherAuthorization = `Bearer ${await accessToken(server.baseUrl, other.clientId, other.clientSecret)}`;
  for (const kind of ["logs", "metrics"] as const) {
    const foreign = await rest(server.baseUrl, "GET", sessionRecordsPath(session.sessionId, kind), undefined, {
      authorization: otherAuthorization,
    });
    t.is(foreign.status, 404, `${kind} of another provider's session`);
    t.is((await listRecords(server, crypto.randomUUID(), kind)).status, 404, `${kind} of an unknown session`);
    t.is((await listRecords(server, "not-a-uuid", kind)).status, 400);
    const unscoped = await rest(server.baseUrl, "GET", sessionRecordsPath(session.sessionId, kind), undefined, {
      authorization: await bearerWithScopes(server, ["entitlements:read"]),
    });
    t.is(unscoped.status, 403);
    const scoped = await rest(server.baseUrl, "GET", sessionRecordsPath(session.sessionId, kind), undefined, {
      authorization: await bearerWithScopes(server, ["usage:read"]),
    });
    t.is(scoped.status, 200);
  }
  const badFilters: [string, string, string][] = [
    ["logs", "?level=notice", "level"],
    ["metrics", "?name=no%20spaces", "name"],
    ["logs", `?from=${iso(START)}&to=${iso(START)}`, "to"],
    ["logs", "?from=yesterday", "from"],
    ["logs", "?pageSize=101", "pageSize"],
  ];
  for (const [kind, query, field] of badFilters) {
    const refused = await listRecords(server, session.sessionId, kind as "logs" | "metrics", query);
    t.is(refused.status, 400, query);
    t.is(refused.body.errors?.[0]?.field, field, query);
  }
});

each("batches sent at once are each counted exactly, and each row is stored once", async (t, mode) => {
  const { server } = t.context.servers[mode];
  const sessions = [await licensedSession(server.baseUrl, "p-1"), await licensedSession(server.baseUrl, "p-2")];
  const batch = Array.from({ length: 150 }, (_, index) => log(index + 1, "info", `line ${index + 1}`));
  const answers = await Promise.all(
    Array.from({ length: 12 }, (_, index) => sendRecords(server.baseUrl, sessions[index % 2], "log", batch)),
  );
  for (const answer of answers) t.is(answer.status, 200, JSON.stringify(answer.body));
  for (const [index, session] of sessions.entries()) {
    const counts = answers.filter((_, sent) => sent % 2 === index).map((answer) => answer.body.acceptedCount);
    t.is(
      counts.reduce((sum, count) => sum + count, 0),
      150,
      `every item counted by exactly one request: ${counts}`,
    );
    t.is((await listRecords(server, session.sessionId, "logs", "?pageSize=1")).body.totalCount, 150);
  }
});

test.serial("logs are recorded over gRPC and listed over Connect", async (t) => {
  const { server, clock } = t.context.servers.mysql;
  const session = await licensedSession(server.baseUrl, "grpc-device");
  const client = grpcClient(ObservabilityService, `127.0.0.1:${server.port}`);
  t.teardown(() => client.close());
  const request = create(RecordLogsRequestSchema, {
    sessionId: session.sessionId,
    events: [
      { transactionId: 7n, eventName: "WARN", eventData: "over gRPC", creationDateTime: timestampFromMs(START) },
    ],
  });
  const answer = await client.call<RecordLogsResponse>(
    "recordLogs",
    request,
    authorizationMetadata(session.authorization),
  );
  t.is(answer.acceptedCount, 1);

  const transport = createConnectTransport({
    baseUrl: server.baseUrl,
    httpVersion: "1.1",
    interceptors: [sendAuthorization(server.adminAuthorization)],
  });
  const listed = await createClient(UsageAdminService, transport).listSessionLogs({
    sessionId: session.sessionId,
    level: "warn",
  });
  t.is(listed.totalCount, 1);
  t.is(listed.items[0].eventData, "over gRPC");
  t.is(listed.items[0].transactionId, 7n);
  t.is(Number(listed.items[0].recordedAt?.seconds) * 1000, Math.floor(clock.now().getTime() / 1000) * 1000);
});
