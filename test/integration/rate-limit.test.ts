import { randomInt } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { createClient as createRedisClient } from "@redis/client";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import mysql from "mysql2/promise";
import { requestToken } from "../support/auth.js";
import { createClient } from "../support/oauth-clients.js";
import { createTestDatabase, startTestServer, TEST_REDIS_URL, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ first: TestServer; second: TestServer; dropDatabase(): Promise<void> }>;

const PER_CLIENT = 5;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.dropDatabase = database.drop;
  const env = { TOKEN_RATE_LIMIT_PER_CLIENT: String(PER_CLIENT) };
  t.context.first = await startTestServer({ databaseUrl: database.url, env });
  t.context.second = await startTestServer({ databaseUrl: database.url, env });
});

test.after.always(async (t) => {
  await t.context.first?.close();
  await t.context.second?.close();
  await t.context.dropDatabase?.();
});

function assertRateLimited(t: ExecutionContext, response: { status: number; headers: Headers; body: any }) {
  t.is(response.status, 429, JSON.stringify(response.body));
  t.is(response.headers.get("content-type"), "application/problem+json");
  t.like(response.body, { status: 429 });
  t.is(typeof response.body.type, "string");
  t.is(typeof response.body.detail, "string");
  const retryAfter = response.headers.get("retry-after") ?? "";
  t.regex(retryAfter, /^\d+$/, "Retry-After is in whole seconds");
  t.true(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, `Retry-After: ${retryAfter}`);
}

test("wrong secrets for one client are limited across instances, then even the right secret is refused", async (t) => {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  const servers = [first, second];
  for (let attempt = 0; attempt < PER_CLIENT; attempt++) {
    const server = servers[attempt % 2];
    const { status } = await requestToken(server.baseUrl, client.clientId, `wrong-${attempt}`);
    t.is(status, 401, `attempt ${attempt + 1} on instance ${(attempt % 2) + 1}`);
  }
  assertRateLimited(t, await requestToken(second.baseUrl, client.clientId, "wrong-again"));
  assertRateLimited(t, await requestToken(first.baseUrl, client.clientId, "wrong-again"));
  assertRateLimited(t, await requestToken(first.baseUrl, client.clientId, client.clientSecret));
  assertRateLimited(t, await requestToken(second.baseUrl, client.clientId, client.clientSecret));
});

test("wrong secrets racing at once across instances: exactly the limit of them are checked, the rest answer 429", async (t) => {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  const responses = await Promise.all(
    Array.from({ length: 60 }, (_, attempt) =>
      requestToken((attempt % 2 === 0 ? first : second).baseUrl, client.clientId, `wrong-${attempt}`),
    ),
  );
  const statuses = responses.map((response) => response.status);
  t.is(statuses.filter((status) => status === 401).length, PER_CLIENT, statuses.join(" "));
  t.is(statuses.filter((status) => status === 429).length, 60 - PER_CLIENT, statuses.join(" "));
  for (const response of responses.filter((candidate) => candidate.status === 429)) assertRateLimited(t, response);
  assertRateLimited(t, await requestToken(first.baseUrl, client.clientId, client.clientSecret));
});

test("successes between failures use none of the limit: exactly the limit of wrong secrets is answered 401", async (t) => {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  const servers = [first, second];
  for (let attempt = 0; attempt < PER_CLIENT - 1; attempt++) {
    t.is((await requestToken(servers[attempt % 2].baseUrl, client.clientId, "wrong")).status, 401);
    t.is((await requestToken(servers[(attempt + 1) % 2].baseUrl, client.clientId, client.clientSecret)).status, 200);
  }
  t.is((await requestToken(second.baseUrl, client.clientId, "wrong")).status, 401, `wrong secret ${PER_CLIENT}`);
  assertRateLimited(t, await requestToken(first.baseUrl, client.clientId, "wrong"));
  assertRateLimited(t, await requestToken(second.baseUrl, client.clientId, client.clientSecret));
});

test("successful requests never count toward a client's limit", async (t) => {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  for (let attempt = 0; attempt < PER_CLIENT + 3; attempt++) {
    const server = attempt % 2 === 0 ? first : second;
    t.is((await requestToken(server.baseUrl, client.clientId, client.clientSecret)).status, 200);
  }
});

test("wrong secrets from one address do not lock the client out of another address", async (t) => {
  const { first } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  for (let attempt = 0; attempt < PER_CLIENT; attempt++) {
    await requestToken(first.baseUrl, client.clientId, "wrong");
  }
  assertRateLimited(t, await requestToken(first.baseUrl, client.clientId, client.clientSecret));
  const elsewhere = await tokenRequestFrom(first, randomLoopbackAddress(), client);
  t.is(elsewhere.status, 200, JSON.stringify(elsewhere.body));
});

test("a limited client id leaves other clients unaffected", async (t) => {
  const { first, second } = t.context;
  const [limited, other] = await Promise.all([
    createClient(first.baseUrl, ["catalog:read"]),
    createClient(first.baseUrl, ["catalog:read"]),
  ]);
  for (let attempt = 0; attempt <= PER_CLIENT; attempt++) {
    await requestToken((attempt % 2 === 0 ? first : second).baseUrl, limited.clientId, "wrong");
  }
  assertRateLimited(t, await requestToken(first.baseUrl, limited.clientId, limited.clientSecret));
  t.is((await requestToken(first.baseUrl, other.clientId, other.clientSecret)).status, 200);
  t.is((await requestToken(second.baseUrl, other.clientId, other.clientSecret)).status, 200);
});

test("once the window ends the right secret gets a token again", async (t) => {
  const { first, second } = t.context;
  const client = await createClient(first.baseUrl, ["catalog:read"]);
  for (let attempt = 0; attempt <= PER_CLIENT; attempt++) {
    await requestToken((attempt % 2 === 0 ? first : second).baseUrl, client.clientId, "wrong");
  }
  assertRateLimited(t, await requestToken(second.baseUrl, client.clientId, client.clientSecret));
  // Redis keeps the window on its own clock; ending it stands in for waiting out the 60 s.
  const redis = createRedisClient({ url: TEST_REDIS_URL });
  await redis.connect();
  t.teardown(() => redis.close());
  const windowKey = `provision:rate:token:attempts:${client.clientId}:127.0.0.1`;
  // Every request of the window was counted as an attempt; none succeeded.
  t.is(await redis.get(windowKey), String(PER_CLIENT + 2), "the window is the Redis key the coordinator counts in");
  t.true((await redis.pTTL(windowKey)) > 0);
  await redis.del(windowKey);
  t.is((await requestToken(second.baseUrl, client.clientId, client.clientSecret)).status, 200);
});

/** A loopback address of this test's own: every test file shares one Redis, and with it 127.0.0.1's counters. */
function randomLoopbackAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

/** POSTs a token request from `localAddress` (any address of 127.0.0.0/8 reaches the loopback listener). */
function tokenRequestFrom(
  server: TestServer,
  localAddress: string,
  client: { clientId: string; clientSecret: string } = server.admin,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: client.clientId,
    client_secret: client.clientSecret,
  }).toString();
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port: server.port,
        path: "/auth/connect/token",
        method: "POST",
        localAddress,
        agent: false,
        headers: { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(form) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: JSON.parse(Buffer.concat(chunks).toString()),
          }),
        );
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(form);
  });
}

test("with TOKEN_RATE_LIMIT_PER_ADDRESS at 3 the fourth request from one address is refused, another address is not", async (t) => {
  const server = await startTestServer({ env: { TOKEN_RATE_LIMIT_PER_ADDRESS: "3" } });
  t.teardown(() => server.close());
  // Every test file shares one Redis, so a loopback address of this test's own stands in for 127.0.0.1.
  const subnet = `127.${randomInt(1, 255)}.${randomInt(0, 256)}`;
  const [address, other] = [`${subnet}.1`, `${subnet}.2`];
  for (let attempt = 1; attempt <= 3; attempt++) {
    t.is((await tokenRequestFrom(server, address)).status, 200, `request ${attempt}`);
  }
  const refused = await tokenRequestFrom(server, address);
  t.is(refused.status, 429);
  t.is(refused.headers["content-type"], "application/problem+json");
  t.regex(String(refused.headers["retry-after"]), /^[1-9]\d*$/);
  t.is((await tokenRequestFrom(server, other)).status, 200);
});

test("a client id differing from a stored one only by trailing spaces is refused and shares that client's limit", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const server = await startTestServer({
    databaseUrl: database.url,
    env: { TOKEN_RATE_LIMIT_PER_CLIENT: String(PER_CLIENT) },
  });
  t.teardown(() => server.close());
  // The collation columns.ts falls back to where no NO PAD one exists (MySQL 5.7): 'id' = 'id ' there.
  const connection = await mysql.createConnection({ uri: database.url });
  t.teardown(() => connection.end());
  await connection.query(
    "ALTER TABLE oauth_clients MODIFY client_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
  );
  const client = await createClient(server.baseUrl, ["catalog:read"]);

  const aliased = await requestToken(server.baseUrl, `${client.clientId} `, client.clientSecret);
  t.is(aliased.status, 401, JSON.stringify(aliased.body));
  t.is(aliased.body.error, "invalid_client");
  t.is(aliased.body.access_token, undefined);

  // That refusal was one wrong attempt; spellings with more spaces are counted under the same client.
  for (let spaces = 2; spaces <= PER_CLIENT; spaces++) {
    const { status } = await requestToken(server.baseUrl, client.clientId + " ".repeat(spaces), "wrong");
    t.is(status, 401, `${spaces} trailing spaces`);
  }
  assertRateLimited(t, await requestToken(server.baseUrl, `${client.clientId}   `, "wrong"));
  assertRateLimited(t, await requestToken(server.baseUrl, client.clientId, client.clientSecret));
});

test("embedded, with the in-process coordinator: exactly the limit of racing wrong secrets is checked, successes given back", async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "provision-rate-limit-"));
  const server = await startTestServer({
    embedded: { file: path.join(directory, "provision.sqlite") },
    env: { TOKEN_RATE_LIMIT_PER_CLIENT: String(PER_CLIENT) },
  });
  t.teardown(() => server.close());
  t.is(server.app.coordinator.kind, "memory");
  const client = await createClient(server.baseUrl, ["catalog:read"]);
  for (let attempt = 0; attempt < PER_CLIENT + 2; attempt++) {
    t.is((await requestToken(server.baseUrl, client.clientId, client.clientSecret)).status, 200);
  }
  const responses = await Promise.all(
    Array.from({ length: 30 }, (_, attempt) => requestToken(server.baseUrl, client.clientId, `wrong-${attempt}`)),
  );
  const statuses = responses.map((response) => response.status);
  t.is(statuses.filter((status) => status === 401).length, PER_CLIENT, statuses.join(" "));
  t.is(statuses.filter((status) => status === 429).length, 30 - PER_CLIENT, statuses.join(" "));
  assertRateLimited(t, await requestToken(server.baseUrl, client.clientId, client.clientSecret));
});

test("a client id over 256 characters is refused as invalid_request before it is counted under a rate-limit key", async (t) => {
  const { first } = t.context;
  const redis = createRedisClient({ url: TEST_REDIS_URL });
  await redis.connect();
  t.teardown(() => redis.close());
  const longId = "x".repeat(257);
  for (let attempt = 0; attempt < PER_CLIENT + 2; attempt++) {
    const response = await requestToken(first.baseUrl, longId, "wrong");
    t.is(response.status, 400, JSON.stringify(response.body));
    t.is(response.body.error, "invalid_request");
    t.regex(response.body.error_description, /256/);
  }
  t.deepEqual(await redis.keys(`provision:rate:token:attempts:${longId}*`), []);
  const basic = await fetch(`${first.baseUrl}/auth/connect/token`, {
    method: "POST",
    headers: { authorization: `Basic ${Buffer.from(`${longId}:wrong`).toString("base64")}` },
    body: new URLSearchParams({ grant_type: "client_credentials" }),
  });
  t.is(basic.status, 400);
  t.is(((await basic.json()) as { error: string }).error, "invalid_request");
  const atTheLimit = await requestToken(first.baseUrl, "y".repeat(256), "wrong");
  t.is(atTheLimit.status, 401, "256 characters are still looked up");
});

test("a burst of wrong secrets from one address delays another address's token by a turn, not the whole burst", async (t) => {
  const { first } = t.context;
  const attacker = randomLoopbackAddress();
  const finished: string[] = [];
  // Unknown client ids: each is checked against the decoy hash, at a real secret check's cost.
  const burst = Array.from({ length: 40 }, (_, index) =>
    tokenRequestFrom(first, attacker, { clientId: `nobody-${randomInt(1e9)}`, clientSecret: `wrong-${index}` }).then(
      (answer) => {
        finished.push("burst");
        return answer;
      },
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  const legitimate = await tokenRequestFrom(first, randomLoopbackAddress());
  finished.push("legitimate");
  const answers = await Promise.all(burst);
  t.is(legitimate.status, 200);
  t.true(
    answers.every((answer) => answer.status === 401),
    JSON.stringify(answers.map((a) => a.status)),
  );
  const before = finished.indexOf("legitimate");
  t.true(before < 20, `the token came after ${before} of the burst's 40 checks`);
});
