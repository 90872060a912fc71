import anyTest, { type TestFn } from "ava";
import { withholding } from "../support/contract.js";
import { activate, entitlementWithCode, sessionIdOf } from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const test = anyTest as TestFn<{ server: TestServer }>;

test.before(async (t) => {
  t.context.server = await startTestServer({
    env: { BODY_LIMIT_BYTES: "4096" },
    services: withholding("provision.v1.FeedbackService", "submitRating"),
  });
});

test.after.always(async (t) => {
  await t.context.server?.close();
});

/** fetch as the server's bootstrap client, with the headers and body exactly as given otherwise. */
async function raw(t: { context: { server: TestServer } }, method: string, path: string, init: RequestInit = {}) {
  const headers = new Headers(init.headers);
  headers.set("authorization", t.context.server.adminAuthorization);
  const response = await fetch(t.context.server.baseUrl + path, { method, ...init, headers });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
}

function assertProblem(
  t: import("ava").ExecutionContext<unknown>,
  response: { status: number; headers: Headers; body: Record<string, unknown> },
  status: number,
) {
  t.is(response.status, status);
  t.is(response.headers.get("content-type"), "application/problem+json");
  t.is(response.body.status, status);
  t.is(typeof response.body.type, "string");
  t.is(typeof response.body.title, "string");
  t.is(typeof response.body.detail, "string");
  t.is(typeof response.body.instance, "string");
  t.false(JSON.stringify(response.body).includes("    at "), "no stack trace");
}

test("malformed JSON answers 400", async (t) => {
  const response = await raw(t, "POST", PRODUCTS, { headers: { "content-type": "application/json" }, body: "{nope" });
  assertProblem(t, response, 400);
  t.is(response.body.type, "urn:provision:problem:malformed-json");
});

test("a body that is not an object answers 400", async (t) => {
  const response = await raw(t, "POST", PRODUCTS, { headers: { "content-type": "application/json" }, body: "[1]" });
  assertProblem(t, response, 400);
});

test("wrongly typed fields answer 400 naming each field", async (t) => {
  const response = await rest(t.context.server.baseUrl, "POST", PRODUCTS, { productCode: 42, name: ["x"] });
  assertProblem(t, response, 400);
  t.deepEqual(
    response.body.errors.map((error: { field: string }) => error.field),
    ["productCode", "name"],
  );
});

test("unknown fields are ignored and application/json with charset is accepted", async (t) => {
  const response = await raw(t, "POST", PRODUCTS, {
    headers: { "content-type": "application/json; charset=utf-8" },
    body: JSON.stringify({ productCode: "CHARSET-1", surprise: { nested: true } }),
  });
  t.is(response.status, 200);
  t.is(response.body.productCode, "CHARSET-1");
});

test("another content type answers 415", async (t) => {
  const response = await raw(t, "POST", PRODUCTS, {
    headers: { "content-type": "text/plain" },
    body: JSON.stringify({ productCode: "TEXT" }),
  });
  assertProblem(t, response, 415);
});

test("JSON in another charset answers 415, and bytes that are not UTF-8 400", async (t) => {
  const latin1 = Buffer.concat([Buffer.from('{"productCode":"CAF'), Buffer.from([0xe9]), Buffer.from('"}')]);
  for (const charset of ["iso-8859-1", "UTF-16"]) {
    const response = await raw(t, "POST", PRODUCTS, {
      headers: { "content-type": `application/json; charset=${charset}` },
      body: latin1,
    });
    assertProblem(t, response, 415);
  }
  const undeclared = await raw(t, "POST", PRODUCTS, { headers: { "content-type": "application/json" }, body: latin1 });
  assertProblem(t, undeclared, 400);
  t.regex(undeclared.body.detail, /UTF-8/);
  const listed = await rest(t.context.server.baseUrl, "GET", `${PRODUCTS}?filter=productCode:CAF*`);
  t.is(listed.body.totalCount, 0, "nothing stored with a replacement character");
});

test("a body over the configured limit answers 413", async (t) => {
  const response = await rest(t.context.server.baseUrl, "POST", PRODUCTS, {
    productCode: "BIG",
    description: "x".repeat(5000),
  });
  assertProblem(t, response, 413);
});

test("a chunked body over the limit answers 413 too", async (t) => {
  const chunks = new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(`{"productCode":"BIG2","description":"`));
      controller.enqueue(new TextEncoder().encode("y".repeat(6000)));
      controller.enqueue(new TextEncoder().encode(`"}`));
      controller.close();
    },
  });
  const response = await raw(t, "POST", PRODUCTS, {
    headers: { "content-type": "application/json" },
    body: chunks,
    duplex: "half",
  } as RequestInit);
  assertProblem(t, response, 413);
  // The connection the 413 came back on is reused or closed, never left dead: the next call is answered.
  const next = await fetch(`${t.context.server.baseUrl}/healthz`, { signal: AbortSignal.timeout(5000) });
  t.is(next.status, 200);
});

test("an unknown path answers 404", async (t) => {
  const response = await raw(t, "GET", "/api/v1/provision/admin/nothing-here");
  assertProblem(t, response, 404);
});

test("a known path with another method answers 405 with Allow", async (t) => {
  const response = await raw(t, "PATCH", PRODUCTS);
  assertProblem(t, response, 405);
  t.is(response.headers.get("allow"), "GET, HEAD, POST");
});

test("a duplicate answers 409", async (t) => {
  await rest(t.context.server.baseUrl, "POST", PRODUCTS, { productCode: "DUP-409" });
  const response = await rest(t.context.server.baseUrl, "POST", PRODUCTS, { productCode: "DUP-409" });
  assertProblem(t, response, 409);
});

test("an unimplemented RPC answers 501, never a fake success", async (t) => {
  const { baseUrl } = t.context.server;
  const { code } = await entitlementWithCode(baseUrl, {});
  const token = (await activate(baseUrl, { activationCode: code, fingerprint: "unimplemented" })).body.licenseToken;
  const sessionId = sessionIdOf(token);
  // Every RPC is implemented now: the server of this file withholds SubmitRating's implementation.
  const paths: [string, string, unknown?][] = [
    ["POST", "/api/v1/provision/user-feedback/rating", { sessionId, rating: 5 }],
  ];
  for (const [method, path, body] of paths) {
    const response = await rest(baseUrl, method, path, body, { authorization: `Bearer ${token}` });
    assertProblem(t, response, 501);
    t.is(response.body.type, "urn:provision:problem:unimplemented", `${method} ${path}`);
  }
});

test("a date-span in an unsupported form answers 400 naming the field", async (t) => {
  const product = await rest(t.context.server.baseUrl, "POST", PRODUCTS, { productCode: "SPAN" });
  const response = await rest(t.context.server.baseUrl, "POST", `${PRODUCTS}/${product.body.id}/monitored-resources`, {
    metricName: "m",
    allowedBackDatingTolerance: "soon",
  });
  assertProblem(t, response, 400);
  t.is(response.body.errors[0].field, "allowedBackDatingTolerance");
});
