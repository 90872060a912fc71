import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import {
  activate,
  ENTITLEMENTS,
  entitlementWithCode,
  sessionCall,
  sessionIdOf,
  sessionPath,
} from "../support/licensing.js";
import { isCompleteResponse, parseHttpResponse, RawConnection } from "../support/raw-http.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// A REST check-in whose token the instance verified before is answered from memory (check-in-fast-route.ts);
// these tests hold it to the full pipeline's answers, for every request it must leave to that pipeline too.

interface Context {
  servers: Record<string, TestServer>;
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;
type Mode = (typeof MODES)[number];

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-check-in-"));
  t.context.servers = {};
  for (const mode of MODES) {
    t.context.servers[mode] = await startTestServer(
      mode === "embedded" ? { embedded: { file: path.join(t.context.folder, "db.sqlite") } } : {},
    );
  }
});

test.after.always(async (t) => {
  for (const server of Object.values(t.context.servers ?? {})) await server.close();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

const FLOATING = {
  claimBasedActivation: { numberOfSeats: 5, isFloatingLicense: true, leaseTime: "00:10:00", gracePeriod: "00:05:00" },
};

function each(title: string, body: (t: ExecutionContext<Context>, mode: Mode) => Promise<void>) {
  for (const mode of MODES) test.serial(`${title} (${mode})`, (t) => body(t, mode));
}

/** Two live sessions of one entitlement, each token already checked in once (so remembered by the instance). */
async function twoSessions(server: TestServer) {
  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
  const tokens: string[] = [];
  for (const fingerprint of ["one", "two"]) {
    const license = await activate(server.baseUrl, { activationCode: code, fingerprint });
    tokens.push(license.body.licenseToken);
  }
  const firstAnswers = [];
  for (const token of tokens) firstAnswers.push(await sessionCall(server.baseUrl, token, "check-in"));
  return { entitlementId, tokens, firstAnswers };
}

async function problemOf(response: Response): Promise<{ type: string }> {
  return (await response.json()) as { type: string };
}

function post(server: TestServer, token: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  return fetch(`${server.baseUrl}${sessionPath(sessionIdOf(token), "check-in")}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, ...init.headers },
    body: init.body,
  });
}

each("a remembered token's check-in answers as the first, verified one did", async (t, mode) => {
  const server = t.context.servers[mode];
  const { tokens, firstAnswers } = await twoSessions(server);
  const first = firstAnswers[0];
  t.is(first.status, 200, JSON.stringify(first.body));
  for (const body of [undefined, "{}", " { } "]) {
    const headers: Record<string, string> = body === undefined ? {} : { "content-type": "application/json" };
    const response = await post(server, tokens[0], { body, headers });
    t.is(response.status, 200);
    t.is(response.headers.get("content-type"), "application/json; charset=utf-8");
    const answer = (await response.json()) as Record<string, unknown>;
    t.deepEqual(Object.keys(answer), Object.keys(first.body));
    t.deepEqual({ ...answer, serverTime: "" }, { ...first.body, serverTime: "" });
  }
});

each("a remembered token still gets the full pipeline's answer to anything unusual", async (t, mode) => {
  const server = t.context.servers[mode];
  const { entitlementId, tokens } = await twoSessions(server);
  const [mine, other] = tokens;

  const asText = await post(server, mine, { body: "{}", headers: { "content-type": "text/plain" } });
  t.is(asText.status, 415);
  const asLatin1 = await post(server, mine, {
    body: "{}",
    headers: { "content-type": "application/json; charset=iso-8859-1" },
  });
  t.is(asLatin1.status, 415, "JSON in another charset than UTF-8 is refused, as the full pipeline refuses it");
  const asUtf8 = await post(server, mine, {
    body: "{}",
    headers: { "content-type": "application/json; charset=UTF-8" },
  });
  t.is(asUtf8.status, 200);
  const broken = await post(server, mine, { body: "{", headers: { "content-type": "application/json" } });
  t.is(broken.status, 400);
  t.is((await problemOf(broken)).type, "urn:provision:problem:malformed-json");
  const naming = await post(server, mine, {
    body: JSON.stringify({ sessionId: sessionIdOf(mine) }),
    headers: { "content-type": "application/json" },
  });
  t.is(naming.status, 200, "a body naming the session is read by the full pipeline");

  const otherPath = await fetch(`${server.baseUrl}${sessionPath(sessionIdOf(other), "check-in")}`, {
    method: "POST",
    headers: { authorization: `Bearer ${mine}` },
  });
  t.is(otherPath.status, 403);
  t.is((await problemOf(otherPath)).type, "urn:provision:problem:wrong-session");

  const ended = await rest(server.baseUrl, "DELETE", `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(mine)}`);
  t.is(ended.status, 200, JSON.stringify(ended.body));
  const afterEnd = await post(server, mine);
  t.is(afterEnd.status, 401);
  t.is((await problemOf(afterEnd)).type, "urn:provision:problem:session-ended");
  t.is((await post(server, other)).status, 200, "the other session runs on");
});

each("a token altered after its signature is refused even when the original is remembered", async (t, mode) => {
  const server = t.context.servers[mode];
  const { tokens } = await twoSessions(server);
  const [header, payload, signature] = tokens[0].split(".");
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  const altered = Buffer.from(JSON.stringify({ ...claims, off: !claims.off })).toString("base64url");
  const response = await post(server, `${header}.${altered}.${signature}`);
  t.is(response.status, 401);
  t.is((await problemOf(response)).type, "urn:provision:problem:invalid-license-token");
  t.is((await post(server, tokens[0])).status, 200);
});

/** Sends `parts` over one connection, `gapMs` apart (or closes after them when `close`), and answers the reply. */
async function rawExchange(server: TestServer, parts: string[], gapMs: number, close = false): Promise<string> {
  const socket = net.connect(Number(new URL(server.baseUrl).port), "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  let reply = "";
  socket.setEncoding("utf8").on("data", (chunk: string) => {
    reply += chunk;
  });
  const closed = new Promise((resolve) => socket.once("close", resolve));
  for (const part of parts) {
    socket.write(part);
    await sleep(gapMs);
  }
  if (close) socket.destroy();
  await closed;
  return reply;
}

function checkInHead(token: string, headers: string): string {
  return (
    `POST ${sessionPath(sessionIdOf(token), "check-in")} HTTP/1.1\r\nHost: localhost\r\n` +
    `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\nConnection: close\r\n${headers}\r\n`
  );
}

each(
  "a remembered token's check-in body arriving in pieces, chunked or cut off is answered as it should",
  async (t, mode) => {
    const server = t.context.servers[mode];
    const { tokens } = await twoSessions(server);
    const pieces = await rawExchange(server, [checkInHead(tokens[0], "Content-Length: 4\r\n"), "{ ", " }"], 50);
    t.regex(pieces, /^HTTP\/1\.1 200 /, "a body in three writes");
    t.regex(pieces, /"sessionId":/);
    const chunked = await rawExchange(
      server,
      [checkInHead(tokens[0], "Transfer-Encoding: chunked\r\n"), "2\r\n{}\r\n", "0\r\n\r\n"],
      20,
    );
    t.regex(chunked, /^HTTP\/1\.1 200 /, "a chunked body goes through the full pipeline");
    const cut = await rawExchange(server, [checkInHead(tokens[0], "Content-Length: 20\r\n"), "{"], 50, true);
    t.is(cut, "", "nothing is answered to a client gone mid-body");
    t.is((await post(server, tokens[0], { body: "{}", headers: { "content-type": "application/json" } })).status, 200);
  },
);

each("pipelined requests on one connection are answered in order, however each is answered", async (t, mode) => {
  const server = t.context.servers[mode];
  const { tokens } = await twoSessions(server);
  const checkIn = (token: string) =>
    `POST ${sessionPath(sessionIdOf(token), "check-in")} HTTP/1.1\r\nHost: localhost\r\n` +
    `Authorization: Bearer ${token}\r\nContent-Length: 0\r\n\r\n`;
  const unknownPath = "GET /no-such-path HTTP/1.1\r\nHost: localhost\r\n\r\n";
  // Check-ins answered from memory at the turn's end, a 404 at once, a health probe, all in one write.
  const requests = [
    checkIn(tokens[0]),
    unknownPath,
    checkIn(tokens[1]),
    "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
  ];
  const connection = await RawConnection.open(server.port);
  t.teardown(() => connection.close());
  connection.write(requests.join("").repeat(3));
  await connection.until(() => connection.responses().filter(isCompleteResponse).length === 12);
  const answers = connection.responses().map((text) => parseHttpResponse(text));
  for (let round = 0; round < 3; round++) {
    const [first, missing, second, healthz] = answers.slice(round * 4, round * 4 + 4);
    t.is(first?.status, 200);
    t.is(JSON.parse(first?.body ?? "{}").sessionId, sessionIdOf(tokens[0]));
    t.is(missing?.status, 404);
    t.is(second?.status, 200);
    t.is(JSON.parse(second?.body ?? "{}").sessionId, sessionIdOf(tokens[1]));
    t.is(healthz?.status, 200);
  }
});
