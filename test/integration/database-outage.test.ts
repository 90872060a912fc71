import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import { CatalogService, ListProductsRequestSchema } from "../../gen/provision/v1/catalog_pb.js";
import { requestToken } from "../support/auth.js";
import { authorizationMetadata } from "../support/credentials.js";
import { type CuttingProxy, startCuttingProxy } from "../support/cutting-proxy.js";
import { grpcClient } from "../support/grpc-client.js";
import { settle } from "../support/held-locks.js";
import { activate, entitlementWithCode, sessionCall } from "../support/licensing.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import {
  createTestDatabase,
  mysqlAddressOf,
  startTestServer,
  type TestServer,
  throughProxy,
} from "../support/test-server.js";

// MySQL out of reach (down, restarting, a network cut) is the service's outage, not the client's fault nor a bug:
// every protocol answers 503 `database-unavailable` with Retry-After, promptly, and the service recovers by itself.
interface Through<Proxy> {
  server: TestServer;
  proxy: Proxy;
}
const test = anyTest as TestFn<{
  outage: Through<TcpProxy>;
  lostCommit: Through<CuttingProxy>;
  drop: () => Promise<void>;
}>;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  const target = mysqlAddressOf(database.url);
  const proxy = await startTcpProxy(target);
  t.context.outage = { proxy, server: await startTestServer({ databaseUrl: throughProxy(database.url, proxy.port) }) };
  const cutting = await startCuttingProxy(target);
  t.context.lostCommit = {
    proxy: cutting,
    server: await startTestServer({ databaseUrl: throughProxy(database.url, cutting.port) }),
  };
});

test.after.always(async (t) => {
  for (const { server, proxy } of [t.context.outage, t.context.lostCommit]) {
    await server?.close();
    await proxy?.close();
  }
  await t.context.drop?.();
});

/** fetch options that fail the test instead of hanging when the service never answers. */
function promptly(): { signal: AbortSignal } {
  return { signal: AbortSignal.timeout(10_000) };
}

test.serial("with MySQL out of reach, REST, Connect, gRPC and the token endpoint answer 503 at once", async (t) => {
  const { server, proxy } = t.context.outage;
  const product = { productCode: "OUTAGE", productVersion: "1", name: "Outage" };
  t.is((await rest(server.baseUrl, "POST", PRODUCTS, product)).status, 200);
  const linesBefore = server.logs.length;
  proxy.refuse();
  t.teardown(() => proxy.restore());

  const listed = await fetch(`${server.baseUrl}${PRODUCTS}`, {
    headers: { authorization: server.adminAuthorization },
    ...promptly(),
  });
  t.is(listed.status, 503);
  t.is(listed.headers.get("retry-after"), "1");
  t.like((await listed.json()) as object, { type: "urn:provision:problem:database-unavailable", status: 503 });

  // A body read before the failure (the request is then "destroyed" in Node's sense, the client still waiting).
  const created = await fetch(`${server.baseUrl}${PRODUCTS}`, {
    method: "POST",
    headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
    body: JSON.stringify({ ...product, productCode: "OUTAGE2" }),
    ...promptly(),
  });
  t.is(created.status, 503);
  t.is(((await created.json()) as { type: string }).type, "urn:provision:problem:database-unavailable");

  const token = await fetch(`${server.baseUrl}/auth/connect/token`, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: server.admin.clientId,
      client_secret: server.admin.clientSecret,
    }),
    ...promptly(),
  });
  t.is(token.status, 503, "the token endpoint answers, after reading the form, instead of leaving the client waiting");
  t.is(((await token.json()) as { type: string }).type, "urn:provision:problem:database-unavailable");

  const connect = await fetch(`${server.baseUrl}/provision.v1.CatalogService/ListProducts`, {
    method: "POST",
    headers: { authorization: server.adminAuthorization, "content-type": "application/json" },
    body: "{}",
    ...promptly(),
  });
  t.is(connect.status, 503);
  t.is(((await connect.json()) as { code: string }).code, "unavailable");

  const grpcCall = grpcClient(CatalogService, `127.0.0.1:${server.port}`);
  t.teardown(() => grpcCall.close());
  const refused = await t.throwsAsync<grpc.ServiceError>(() =>
    grpcCall.call("listProducts", create(ListProductsRequestSchema), authorizationMetadata(server.adminAuthorization)),
  );
  t.is(refused?.code, grpc.status.UNAVAILABLE);

  // Background work (webhook delivery rounds, each second) meets the outage too.
  await settle(1500);
  const lines = server.logs.slice(linesBefore);
  t.true(lines.some((line) => line.includes("webhook delivery round failed")));
  t.false(
    lines.some((line) => line.includes('"stack"')),
    "the outage is logged without a stack at each attempt",
  );
  t.false(
    lines.some((line) => line.includes('"level":"error"')),
    "an outage is logged as a warning, not as unhandled errors",
  );
  t.true(lines.some((line) => line.includes("database unreachable")));

  proxy.restore();
  t.is((await requestToken(server.baseUrl, server.admin.clientId, server.admin.clientSecret)).status, 200);
  const after = await rest(server.baseUrl, "GET", `${PRODUCTS}?filter=OUTAGE`);
  t.is(after.status, 200);
  t.deepEqual(
    after.body.items.map((item: { productCode: string }) => item.productCode),
    ["OUTAGE"],
    "the write refused during the outage did not land",
  );
});

test.serial("with MySQL out of reach, activation and renew answer 503; check-in from memory or 503", async (t) => {
  const { server, proxy } = t.context.outage;
  const policy = { claimBasedActivation: { numberOfSeats: 5, isFloatingLicense: true, leaseTime: "01:00:00" } };
  const { code } = await entitlementWithCode(server.baseUrl, policy);
  const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "outage-1" });
  t.is(first.status, 200, JSON.stringify(first.body));
  proxy.refuse();
  t.teardown(() => proxy.restore());

  const checkedIn = await sessionCall(server.baseUrl, first.body.licenseToken, "check-in");
  // Answered from memory when the instance holds the session and its standing (see the hot path), else 503.
  t.true(checkedIn.status === 200 || checkedIn.body.type === "urn:provision:problem:database-unavailable");
  const activation = await activate(server.baseUrl, { activationCode: code, fingerprint: "outage-2" });
  t.is(activation.status, 503, JSON.stringify(activation.body));
  t.is(activation.body.type, "urn:provision:problem:database-unavailable");
  const renewed = await sessionCall(server.baseUrl, first.body.licenseToken, "renew");
  t.is(renewed.status, 503, JSON.stringify(renewed.body));
  t.is(renewed.body.type, "urn:provision:problem:database-unavailable");

  proxy.restore();
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "outage-2" })).status, 200);
});

test.serial("a vendor write whose COMMIT's answer is lost answers 503 outcome-unknown", async (t) => {
  const { server, proxy } = t.context.lostCommit;
  const made = await rest(server.baseUrl, "POST", PRODUCTS, {
    productCode: "DOUBT",
    productVersion: "1",
    name: "Before",
  });
  t.is(made.status, 200);
  const path = `${PRODUCTS}/${made.body.id}`;
  proxy.arm("LOSTWRITE");
  const lost = await rest(server.baseUrl, "PUT", path, { name: "LOSTWRITE" });
  t.is(proxy.cuts(), 1);
  t.is(lost.status, 503, JSON.stringify(lost.body));
  t.is(lost.body.type, "urn:provision:problem:outcome-unknown");
  t.is(lost.headers.get("retry-after"), "1");
  const read = await rest(server.baseUrl, "GET", path);
  t.true(["Before", "LOSTWRITE"].includes(read.body.name), JSON.stringify(read.body));
  t.is((await rest(server.baseUrl, "PUT", path, { name: "LOSTWRITE" })).status, 200, "sent again, it lands");
});

test.serial(
  "a renew whose COMMIT's answer is lost leaves no instance answering from the lease before it",
  async (t) => {
    const { server, proxy } = t.context.lostCommit;
    const policy = { claimBasedActivation: { numberOfSeats: 5, isFloatingLicense: true, leaseTime: "01:00:00" } };
    const { code } = await entitlementWithCode(server.baseUrl, policy);
    const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "renew-in-doubt" });
    t.is(first.status, 200, JSON.stringify(first.body));
    const token = first.body.licenseToken as string;
    // A bus keeps nothing until its subscriptions stand, about a second after it connected.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const before = await sessionCall(server.baseUrl, token, "check-in");
    t.is(before.status, 200, "the instance now keeps the session in memory");

    const cutsBefore = proxy.cuts();
    proxy.arm("UPDATE license_sessions SET lease_expires_at");
    const renewed = await sessionCall(server.baseUrl, token, "renew", { requestedLeaseDuration: "60s" });
    t.is(proxy.cuts(), cutsBefore + 1);
    t.is(renewed.status, 503, JSON.stringify(renewed.body));
    t.is(renewed.body.type, "urn:provision:problem:outcome-unknown");

    const after = await sessionCall(server.baseUrl, token, "check-in");
    t.is(after.status, 200, JSON.stringify(after.body));
    const leaseLeftMs = Date.parse(after.body.leaseExpiresAt) - Date.now();
    t.true(
      leaseLeftMs <= 60_000,
      `check-in answers the lease the COMMIT wrote, not the hour before it (${leaseLeftMs} ms)`,
    );
  },
);
