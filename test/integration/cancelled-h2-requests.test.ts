import { once } from "node:events";
import fs from "node:fs";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import test from "ava";
import { CLIENTS, createClient } from "../support/oauth-clients.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

let server: TestServer;
test.before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "provision-cancelled-"));
  server = await startTestServer({ embedded: { file: path.join(dir, "provision.sqlite") } });
});
test.after.always(() => server?.close());

/** Opens an h2c session and waits until it is connected. */
async function connected(): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(server.baseUrl);
  session.on("error", () => {});
  await new Promise((resolve) => session.once("connect", resolve));
  return session;
}

/** Sends each request and its RST_STREAM in the same tick: they leave together, as in a rapid-reset flood. */
function sendCancelled(session: http2.ClientHttp2Session, method: string, paths: string[]): void {
  for (const requestPath of paths) {
    const stream = session.request({
      ":method": method,
      ":path": requestPath,
      authorization: server.adminAuthorization,
    });
    stream.on("error", () => {});
    stream.close(http2.constants.NGHTTP2_CANCEL);
  }
}

test("HTTP/2 requests reset as they arrive are not carried out (a rapid-reset flood costs no work)", async (t) => {
  const victims = await Promise.all(
    Array.from({ length: 20 }, (_, index) => createClient(server.baseUrl, ["catalog:read"], `victim ${index}`)),
  );
  const session = await connected();
  sendCancelled(
    session,
    "DELETE",
    victims.map((victim) => `${CLIENTS}/${victim.clientId}`),
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  session.close();
  const victimPaths = new Set(victims.map((victim) => `${CLIENTS}/${victim.clientId}`));
  const logged = server.logs.map((line) => JSON.parse(line)).filter((record) => victimPaths.has(record.path));
  t.deepEqual(
    logged.map((record) => record.status),
    victims.map(() => 499),
  );
  for (const victim of victims) {
    const read = await rest(server.baseUrl, "GET", `${CLIENTS}/${victim.clientId}`);
    t.is(read.status, 200, `client ${victim.clientId} was deleted by a reset request`);
  }
});

test("an HTTP/2 request that is not reset is still carried out", async (t) => {
  const victim = await createClient(server.baseUrl, ["catalog:read"], "kept");
  const session = await connected();
  const stream = session.request({
    ":method": "DELETE",
    ":path": `${CLIENTS}/${victim.clientId}`,
    authorization: server.adminAuthorization,
  });
  const [headers] = await once(stream, "response");
  stream.resume();
  session.close();
  t.is(headers[":status"], 200);
  t.is((await rest(server.baseUrl, "GET", `${CLIENTS}/${victim.clientId}`)).status, 404);
});
