import http2 from "node:http2";
import https from "node:https";
import type { TLSSocket } from "node:tls";
import anyTest, { type TestFn } from "ava";
import { pollUntil } from "../support/poll.js";
import { PRODUCTS } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";
import { createSelfSignedCert, type SelfSignedCert } from "../support/tls-cert.js";

const test = anyTest as TestFn<{ cert: SelfSignedCert; server: TestServer }>;

test.before(async (t) => {
  t.context.cert = await createSelfSignedCert();
  const { certFile, keyFile } = t.context.cert;
  t.context.server = await startTestServer({ tls: { certFile, keyFile } });
});

test.after.always(async (t) => {
  await t.context.server?.close();
  t.context.cert?.remove();
});

interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
}

/** One request on an HTTP/2 session; `body` is sent as JSON when given, `authorization` when given. */
function h2Request(
  session: http2.ClientHttp2Session,
  method: string,
  path: string,
  body?: unknown,
  authorization?: string,
) {
  return new Promise<H2Response>((resolve, reject) => {
    const headers: http2.OutgoingHttpHeaders = { ":method": method, ":path": path };
    if (authorization) headers.authorization = authorization;
    if (body !== undefined) headers["content-type"] = "application/json";
    const stream = session.request(headers, { endStream: body === undefined });
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let text = "";
    stream.setEncoding("utf8");
    stream.on("response", (received) => {
      responseHeaders = received;
    });
    stream.on("data", (chunk: string) => {
      text += chunk;
    });
    stream.once("end", () =>
      resolve({ status: Number(responseHeaders[":status"]), headers: responseHeaders, body: text }),
    );
    stream.once("error", reject);
    if (body !== undefined) stream.end(JSON.stringify(body));
  });
}

async function withSession<T>(
  t: { context: { cert: SelfSignedCert; server: TestServer } },
  use: (session: http2.ClientHttp2Session) => Promise<T>,
) {
  const session = http2.connect(t.context.server.baseUrl, { ca: t.context.cert.cert });
  try {
    await new Promise<void>((resolve, reject) => {
      session.once("connect", () => resolve());
      session.once("error", reject);
    });
    return await use(session);
  } finally {
    session.close();
  }
}

test("HTTPS/1.1 without ALPN reaches /healthz over HTTP/1.1", async (t) => {
  const response = await new Promise<{
    status: number;
    httpVersion: string;
    alpn: string | false | null;
    body: string;
  }>((resolve, reject) => {
    const request = https.get(
      `${t.context.server.baseUrl}/healthz`,
      { ca: t.context.cert.cert, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.once("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            httpVersion: res.httpVersion,
            alpn: (res.socket as TLSSocket).alpnProtocol,
            body,
          }),
        );
      },
    );
    request.once("error", reject);
  });
  t.is(response.status, 200);
  t.is(response.httpVersion, "1.1");
  t.false(response.alpn, "the client offered no ALPN protocol");
  t.deepEqual(JSON.parse(response.body), { status: "ok" });
});

test("HTTP/2 over TLS negotiates h2 by ALPN and reaches /healthz", async (t) => {
  await withSession(t, async (session) => {
    t.is(session.alpnProtocol, "h2");
    const response = await h2Request(session, "GET", "/healthz");
    t.is(response.status, 200);
    t.deepEqual(JSON.parse(response.body), { status: "ok" });
  });
  const logged = await pollUntil("the log line of the h2 request", () =>
    t.context.server.logs
      .map((line) => JSON.parse(line))
      .find((record) => record.msg === "request" && record.path === "/healthz" && record.httpVersion === "2.0"),
  );
  t.is(logged.status, 200);
});

test("a REST create-product call works over HTTP/2 and TLS", async (t) => {
  await withSession(t, async (session) => {
    const { adminAuthorization } = t.context.server;
    const created = await h2Request(
      session,
      "POST",
      PRODUCTS,
      { productCode: "TLS-H2-1", name: "Over h2" },
      adminAuthorization,
    );
    t.is(created.status, 200, created.body);
    t.regex(String(created.headers["content-type"]), /^application\/json/);
    const product = JSON.parse(created.body);
    t.like(product, { productCode: "TLS-H2-1", name: "Over h2", revisionNumber: 1 });

    const fetched = await h2Request(session, "GET", `${PRODUCTS}/${product.id}`, undefined, adminAuthorization);
    t.is(fetched.status, 200);
    t.is(JSON.parse(fetched.body).productCode, "TLS-H2-1");
  });
});
