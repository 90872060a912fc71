import { once } from "node:events";
import fs from "node:fs";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { accessToken } from "../support/auth.js";
import { createClient } from "../support/oauth-clients.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// A client's first burst of calls with a new access token (or any burst reaching an instance just started) checks
// the token's signature once, not once per call; a token refused is not remembered.
const test = anyTest as TestFn<{ server: TestServer; folder: string }>;

test.before(async (t) => {
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-token-burst-"));
  t.context.server = await startTestServer({ embedded: { file: path.join(t.context.folder, "provision.sqlite") } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
  if (t.context.folder) fs.rmSync(t.context.folder, { recursive: true, force: true });
});

function listProducts(baseUrl: string, token: string) {
  return rest(baseUrl, "GET", PRODUCTS, undefined, { authorization: `Bearer ${token}` });
}

/**
 * `count` product lists sent as streams of one HTTP/2 connection, all in the same turn: their frames reach the
 * server together, so every call is under way before the first signature check can end. Answers their statuses.
 */
async function listProductsTogether(baseUrl: string, token: string, count: number): Promise<number[]> {
  const session = http2.connect(baseUrl);
  try {
    await once(session, "connect");
    const statuses = Array.from(
      { length: count },
      () =>
        new Promise<number>((resolve, reject) => {
          const stream = session.request({ ":method": "GET", ":path": PRODUCTS, authorization: `Bearer ${token}` });
          stream.on("response", (headers) => resolve(Number(headers[":status"])));
          stream.on("error", reject);
          stream.resume();
        }),
    );
    return await Promise.all(statuses);
  } finally {
    session.close();
  }
}

test("32 calls arriving at once with a token not seen yet share one signature check", async (t) => {
  const { baseUrl, app } = t.context.server;
  const client = await createClient(baseUrl, ["catalog:read"]);
  const token = await accessToken(baseUrl, client.clientId, client.clientSecret);
  const before = app.tokens.signatureChecks;
  const answers = await Promise.all(Array.from({ length: 32 }, () => listProducts(baseUrl, token)));
  t.deepEqual(
    answers.map((answer) => answer.status),
    Array(32).fill(200),
  );
  t.is(app.tokens.signatureChecks - before, 1);
  await listProducts(baseUrl, token);
  t.is(app.tokens.signatureChecks - before, 1, "a token verified before is answered from memory");

  const [header, payload] = token.split(".");
  const forged = `${header}.${payload}.${"A".repeat(86)}`;
  t.deepEqual(await listProductsTogether(baseUrl, forged, 8), Array(8).fill(401));
  t.is(app.tokens.signatureChecks - before, 2, "the forged token's eight calls shared one check");
  t.is((await listProducts(baseUrl, forged)).status, 401);
  t.is(app.tokens.signatureChecks - before, 3, "a refusal is not remembered once its check is over");
});
