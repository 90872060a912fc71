import http from "node:http";
import anyTest, { type TestFn } from "ava";
import { PRODUCTS } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

// Browser scripts of the origins CORS_ALLOWED_ORIGINS names may call the service; other origins get no CORS headers.
const test = anyTest as TestFn<{ server: TestServer }>;
const CONSOLE = "https://console.example.com";

test.before(async (t) => {
  t.context.server = await startTestServer({ env: { CORS_ALLOWED_ORIGINS: `${CONSOLE}, http://localhost:3000` } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

function call(server: TestServer, method: string, path: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const request = http.request({ host: "127.0.0.1", port: server.port, method, path, headers }, (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        text += chunk;
      });
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }));
    });
    request.on("error", reject);
    request.end(body);
  });
}

test("an allowed origin's preflight is answered with what the call may send", async (t) => {
  const { server } = t.context;
  const preflight = await call(server, "OPTIONS", PRODUCTS, {
    origin: CONSOLE,
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization, content-type",
  });
  t.is(preflight.status, 204);
  t.like(preflight.headers, {
    "access-control-allow-origin": CONSOLE,
    "access-control-allow-headers": "authorization, content-type",
    "access-control-max-age": "7200",
    vary: "Origin",
  });
  t.regex(String(preflight.headers["access-control-allow-methods"]), /POST/);
});

test("an allowed origin's calls can be read by its script, REST and Connect alike", async (t) => {
  const { server } = t.context;
  const listed = await call(server, "GET", PRODUCTS, { origin: CONSOLE, authorization: server.adminAuthorization });
  t.is(listed.status, 200);
  t.is(listed.headers["access-control-allow-origin"], CONSOLE);
  t.regex(String(listed.headers["access-control-expose-headers"]), /X-Request-Id/);
  const refused = await call(server, "GET", PRODUCTS, { origin: "http://localhost:3000" });
  t.is(refused.status, 401, "the credential decides, as without an origin");
  t.is(refused.headers["access-control-allow-origin"], "http://localhost:3000");
  const rpc = await call(
    server,
    "POST",
    "/provision.v1.CatalogService/ListProducts",
    { origin: CONSOLE, authorization: server.adminAuthorization, "content-type": "application/json" },
    "{}",
  );
  t.is(rpc.status, 200, rpc.body);
  t.is(rpc.headers["access-control-allow-origin"], CONSOLE);
});

test("another origin gets no CORS headers, and its preflight is an ordinary OPTIONS", async (t) => {
  const { server } = t.context;
  const other = { origin: "https://elsewhere.example", "access-control-request-method": "POST" };
  const preflight = await call(server, "OPTIONS", PRODUCTS, other);
  t.is(preflight.status, 405);
  t.is(preflight.headers["access-control-allow-origin"], undefined);
  const listed = await call(server, "GET", PRODUCTS, { ...other, authorization: server.adminAuthorization });
  t.is(listed.status, 200);
  t.is(listed.headers["access-control-allow-origin"], undefined);
});
