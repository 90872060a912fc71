import test from "ava";
import { requestToken } from "../support/auth.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { startTestServer, TEST_REDIS_URL } from "../support/test-server.js";

test("losing Redis costs rate limiting, not the service: tokens are still issued and the API still answers", async (t) => {
  const redis = new URL(TEST_REDIS_URL);
  const proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  const server = await startTestServer({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  t.teardown(() => server.close());
  const { clientId, clientSecret } = server.admin;
  t.is((await requestToken(server.baseUrl, clientId, clientSecret)).status, 200);

  await proxy.close();
  const during = await requestToken(server.baseUrl, clientId, clientSecret);
  t.is(during.status, 200, JSON.stringify(during.body));
  t.is((await rest(server.baseUrl, "GET", PRODUCTS)).status, 200);
  t.is((await rest(server.baseUrl, "GET", "/readyz")).status, 503, "readiness reports the outage");
  t.true(server.logs.some((line) => line.includes("coordinator unavailable")));
});
