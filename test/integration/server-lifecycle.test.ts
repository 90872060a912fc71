import { randomBytes } from "node:crypto";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { accessToken, requestToken } from "../support/auth.js";
import { pollUntil } from "../support/poll.js";
import { type ProvisionProcess, spawnProvision } from "../support/provision-process.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";
import { createSelfSignedCert } from "../support/tls-cert.js";

const test = anyTest as TestFn<{ server: TestServer; tmp: string; processes: ProvisionProcess[] }>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

test.before(async (t) => {
  t.context.server = await startTestServer();
  t.context.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "provision-lifecycle-"));
  t.context.processes = [];
});

test.after.always(async (t) => {
  for (const child of t.context.processes ?? []) child.kill();
  await t.context.server?.close();
  if (t.context.tmp) fs.rmSync(t.context.tmp, { recursive: true, force: true });
});

/** The service as a real process on an ephemeral port and its own SQLite file; killed after the file's tests. */
async function startProcess(
  t: { context: { tmp: string; processes: ProvisionProcess[] } },
  env = {},
  options: { throughNpm?: boolean } = {},
) {
  const file = path.join(fs.mkdtempSync(path.join(t.context.tmp, "db-")), "p.sqlite");
  const child = spawnProvision(
    {
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: `sqlite:${file}`,
      LOG_LEVEL: "info",
      ...env,
    },
    options,
  );
  t.context.processes.push(child);
  const listening = await child.waitForLog((record) => record.msg === "provision is listening");
  return { child, port: listening.port as number };
}

function requestLog(server: TestServer, requestId: string): Promise<Record<string, any>> {
  return pollUntil(`the log line of request ${requestId}`, () =>
    server.logs
      .map((line) => JSON.parse(line))
      .find((record) => record.msg === "request" && record.requestId === requestId),
  );
}

test("GET /healthz answers 200 with status ok", async (t) => {
  const { status, headers, body } = await rest(t.context.server.baseUrl, "GET", "/healthz");
  t.is(status, 200);
  t.regex(headers.get("content-type") ?? "", /^application\/json/);
  t.deepEqual(body, { status: "ok" });
});

test("GET /readyz answers 200 while MySQL and Redis are up", async (t) => {
  t.is(t.context.server.app.coordinator.kind, "redis");
  const { status, body } = await rest(t.context.server.baseUrl, "GET", "/readyz");
  t.is(status, 200);
  t.deepEqual(body, { status: "ready" });
});

test("GET /readyz answers a 503 problem naming the coordinator once Redis becomes unreachable", async (t) => {
  const redis = new URL(TEST_REDIS_URL);
  const proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  const server = await startTestServer({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  try {
    t.is((await rest(server.baseUrl, "GET", "/readyz")).status, 200, "ready through the proxy");

    await proxy.close();
    const notReady = await pollUntil("/readyz to answer 503", async () => {
      const response = await fetch(`${server.baseUrl}/readyz`);
      if (response.status === 503) return response;
      await response.arrayBuffer();
      return undefined;
    });
    t.is(notReady.headers.get("content-type"), "application/problem+json");
    const problem = (await notReady.json()) as Record<string, any>;
    t.is(problem.status, 503);
    t.is(problem.instance, "/readyz");
    t.is(problem.detail, "coordinator is unreachable", "names the dependency, not its raw error");
    t.is((await rest(server.baseUrl, "GET", "/healthz")).status, 200, "liveness does not depend on Redis");
  } finally {
    await proxy.close().catch(() => undefined);
    await server.close();
  }
});

test("a valid X-Request-Id is echoed on the response and logged with the request", async (t) => {
  const requestId = "req-7f3a.B_2:trace";
  const response = await fetch(`${t.context.server.baseUrl}/healthz`, { headers: { "x-request-id": requestId } });
  t.is(response.status, 200);
  t.is(response.headers.get("x-request-id"), requestId);
  const record = await requestLog(t.context.server, requestId);
  t.like(record, { method: "GET", path: "/healthz", status: 200 });

  const problem = await rest(t.context.server.baseUrl, "GET", "/no/such/route", undefined, {
    "x-request-id": "req-404",
  });
  t.is(problem.status, 404);
  t.is(problem.headers.get("x-request-id"), "req-404");
  t.is(problem.body.requestId, "req-404", "problem records carry the request id too");
});

test("an absent or invalid X-Request-Id is replaced by a fresh UUID", async (t) => {
  const offered = [undefined, "x".repeat(300), "has spaces in it", "semi;colon", ""];
  const seen = new Set<string>();
  for (const requestId of offered) {
    const response = await fetch(`${t.context.server.baseUrl}/healthz`, {
      headers: requestId === undefined ? {} : { "x-request-id": requestId },
    });
    const answered = response.headers.get("x-request-id") ?? "";
    t.regex(answered, UUID, `offered ${JSON.stringify(requestId)}`);
    t.not(answered, requestId);
    seen.add(answered);
    await requestLog(t.context.server, answered);
  }
  t.is(seen.size, offered.length, "every request gets its own id");
});

test("client secrets, access tokens, bodies and query strings never reach the logs", async (t) => {
  const server = await startTestServer({ env: { LOG_LEVEL: "trace" } });
  try {
    const { clientId, clientSecret } = server.admin;
    const token = await accessToken(server.baseUrl, clientId, clientSecret);
    const wrongSecret = `wrong-${randomBytes(16).toString("hex")}`;
    t.is((await requestToken(server.baseUrl, clientId, wrongSecret)).status, 401);
    const forgedToken = "super-secret-token-123";
    const password = "hunter2";
    const filterSecret = "classified-filter-42";
    const send = async (
      requestId: string,
      method: string,
      url: string,
      body?: string,
      type = "application/json",
      bearer = token,
    ) => {
      const response = await fetch(server.baseUrl + url, {
        method,
        headers: {
          authorization: `Bearer ${bearer}`,
          "x-request-id": requestId,
          ...(body === undefined ? {} : { "content-type": type }),
        },
        body,
      });
      await response.arrayBuffer();
      return response.status;
    };

    const statuses = [
      await send("s1", "GET", `${PRODUCTS}?filter=${filterSecret}`),
      await send("s2", "GET", `${PRODUCTS}?filter=${encodeURIComponent(`nosuchfield=${filterSecret}`)}`),
      await send("s3", "POST", PRODUCTS, JSON.stringify({ productCode: "SECRET-1", secret: password })),
      await send("s4", "POST", PRODUCTS, `{"productCode":"SECRET-2","secret":"${password}"`),
      await send(
        "s5",
        "POST",
        `${PRODUCTS}?filter=${filterSecret}`,
        JSON.stringify({ secret: password }),
        "text/plain",
      ),
      await send("s6", "POST", "/provision.v1.CatalogService/CreateProduct", JSON.stringify({ secret: password })),
      await send("s7", "POST", "/api/v1/webhooks/admin/subscriptions", JSON.stringify({ secret: password })),
      await send("s8", "GET", `/readyz?filter=${filterSecret}`),
      await send("s9", "GET", `${PRODUCTS}?filter=${filterSecret}`, undefined, undefined, forgedToken),
    ];
    t.deepEqual(statuses, [200, 400, 200, 400, 415, 400, 400, 200, 401]);
    for (const requestId of ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"]) await requestLog(server, requestId);

    for (const line of server.logs) {
      for (const secret of [clientSecret, wrongSecret, token, forgedToken, password, filterSecret]) {
        t.false(line.includes(secret), `log line leaks ${secret}: ${line}`);
      }
    }
  } finally {
    await server.close();
  }
});

test("SIGTERM lets a request whose body is still arriving finish, then exits 0", async (t) => {
  const admin = { clientId: "lifecycle-admin", clientSecret: randomBytes(32).toString("base64url") };
  const { child, port } = await startProcess(t, {
    PROVISION_BOOTSTRAP_CLIENT_ID: admin.clientId,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: admin.clientSecret,
  });
  const token = await accessToken(`http://127.0.0.1:${port}`, admin.clientId, admin.clientSecret, "catalog:create");
  const body = Buffer.from(JSON.stringify({ productCode: "DRAIN-1", name: "Finished while draining" }));
  const half = Math.floor(body.length / 2);

  const request = http.request({
    host: "127.0.0.1",
    port,
    method: "POST",
    path: PRODUCTS,
    // 100-continue tells us the server has read the headers and is handling the request before SIGTERM.
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "content-length": body.length,
      expect: "100-continue",
    },
  });
  const answered = new Promise<{ status: number; body: any }>((resolve, reject) => {
    request.once("error", reject);
    request.once("response", (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.once("error", reject);
      response.once("end", () =>
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) }),
      );
    });
  });
  request.flushHeaders();
  await once(request, "continue");
  request.write(body.subarray(0, half));

  child.child.kill("SIGTERM");
  await child.waitForLog((record) => record.msg === "draining");
  request.end(body.subarray(half));

  const response = await answered;
  t.is(response.status, 200);
  t.like(response.body, { productCode: "DRAIN-1", name: "Finished while draining" });
  t.regex(response.body.id, UUID);

  const exit = await child.exitWithin(10_000);
  t.deepEqual(exit, { code: 0, signal: null });
  t.true(child.stdout().includes("stopped"));
});

test("SIGTERM with no request in flight exits 0 without waiting out the grace period", async (t) => {
  // A 60 s grace: if the idle connection held shutdown up, the exit would miss the 10 s bound below.
  const { child, port } = await startProcess(t, { SHUTDOWN_GRACE_MS: "60000" });
  // An idle keep-alive connection must not hold the shutdown up.
  const agent = new http.Agent({ keepAlive: true });
  const status = await new Promise<number>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: "/healthz", agent }, (response) => {
        response.resume();
        response.once("end", () => resolve(response.statusCode ?? 0));
      })
      .once("error", reject);
  });
  t.is(status, 200);

  child.child.kill("SIGTERM");
  const exit = await child.exitWithin(10_000);
  agent.destroy();
  t.deepEqual(exit, { code: 0, signal: null });
  t.true(child.stdout().includes("stopped"));
});

test("SIGTERM sent to `npm start` reaches the service, which drains and exits 0", async (t) => {
  // Container runtimes signal npm itself; a shell between npm and node would die and orphan the service.
  const { child, port } = await startProcess(t, {}, { throughNpm: true });
  t.is((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);

  child.child.kill("SIGTERM");
  await child.waitForLog((record) => record.msg === "draining");
  const exit = await child.exitWithin(10_000);
  t.truthy(exit, "npm exits");
  t.true(child.stdout().includes("stopped"));
  await t.throwsAsync(fetch(`http://127.0.0.1:${port}/healthz`), undefined, "nothing listens any more");
});

/** Starts the process with `env` and expects it to refuse to start with exactly one line on stderr. */
async function startupFailure(
  t: { context: { tmp: string; processes: ProvisionProcess[] } },
  env: Record<string, string>,
) {
  const child = spawnProvision({
    PORT: "0",
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${path.join(fs.mkdtempSync(path.join(t.context.tmp, "bad-")), "p.sqlite")}`,
    ...env,
  });
  t.context.processes.push(child);
  const exit = await child.exitWithin(20_000);
  return { exit, lines: child.stderr().trimEnd().split("\n") };
}

test("PORT=abc stops the process with one line naming PORT", async (t) => {
  const { exit, lines } = await startupFailure(t, { PORT: "abc" });
  t.truthy(exit, "the process exits");
  t.not(exit?.code, 0);
  t.is(lines.length, 1, lines.join("\n"));
  t.regex(lines[0], /\bPORT\b/);
});

test("an unsupported DATABASE_URL stops the process with one line naming DATABASE_URL", async (t) => {
  const { exit, lines } = await startupFailure(t, { DATABASE_URL: "postgres://x/y" });
  t.truthy(exit, "the process exits");
  t.not(exit?.code, 0);
  t.is(lines.length, 1, lines.join("\n"));
  t.regex(lines[0], /\bDATABASE_URL\b/);
});

test("a TLS certificate file that cannot be read stops the process with one line naming TLS_CERT_FILE", async (t) => {
  const missing = path.join(t.context.tmp, "missing");
  const { exit, lines } = await startupFailure(t, {
    TLS_CERT_FILE: path.join(missing, "cert.pem"),
    TLS_KEY_FILE: path.join(missing, "key.pem"),
  });
  t.truthy(exit, "the process exits");
  t.not(exit?.code, 0);
  t.is(lines.length, 1, lines.join("\n"));
  t.regex(lines[0], /\bTLS_CERT_FILE\b/);
});

test("a port in use, an address not of this machine or TLS files that do not go together stop the process before it writes anything", async (t) => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", () => resolve()));
  t.teardown(() => taken.close());
  const cert = await createSelfSignedCert();
  const other = await createSelfSignedCert();
  t.teardown(() => {
    cert.remove();
    other.remove();
  });
  const cases: [Record<string, string>, string][] = [
    [{ PORT: String((taken.address() as net.AddressInfo).port) }, "PORT"],
    // TEST-NET-1: binding to it fails on this machine without a packet sent.
    [{ HOST: "192.0.2.1" }, "HOST"],
    [{ TLS_CERT_FILE: cert.keyFile, TLS_KEY_FILE: cert.keyFile }, "TLS_CERT_FILE"],
    [{ TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: cert.certFile }, "TLS_KEY_FILE"],
    [{ TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: other.keyFile }, "TLS_KEY_FILE"],
  ];
  for (const [env, variable] of cases) {
    const database = path.join(fs.mkdtempSync(path.join(t.context.tmp, "unwritten-")), "p.sqlite");
    const { exit, lines } = await startupFailure(t, { ...env, DATABASE_URL: `sqlite:${database}` });
    t.is(exit?.code, 2, `${variable}: ${lines.join("\n")}`);
    t.is(lines.length, 1, lines.join("\n"));
    t.regex(lines[0], new RegExp(`\\b${variable}\\b`));
    t.false(fs.existsSync(database), `${variable}: no database made, so no first client whose secret went unused`);
  }
});

test("an unreachable MySQL stops the process with one line naming DATABASE_URL", async (t) => {
  const { exit, lines } = await startupFailure(t, { DATABASE_URL: "mysql://root@127.0.0.1:1/provision" });
  t.truthy(exit, "the process exits");
  t.not(exit?.code, 0);
  t.is(lines.length, 1, lines.join("\n"));
  t.regex(lines[0], /\bDATABASE_URL\b/);
});
