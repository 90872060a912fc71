import test from "ava";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { startCuttingProxy } from "../support/cutting-proxy.js";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionIdOf } from "../support/licensing.js";
import { rest } from "../support/rest.js";
import { createTestDatabase, startTestServer } from "../support/test-server.js";
import { insertSubscription } from "../support/webhooks.js";

// The connection to MySQL lost between a group's COMMIT and its answer: the group may have committed, and must
// not be written a second time (each activation alone), which would count every device's code use twice.
test("a group whose COMMIT's answer is lost answers each activation once, counted once", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const direct = new URL(database.url);
  const proxy = await startCuttingProxy({ host: direct.hostname, port: Number(direct.port || 3306) });
  t.teardown(() => proxy.close());
  const throughProxy = new URL(database.url);
  throughProxy.port = String(proxy.port);
  const server = await startTestServer({ databaseUrl: throughProxy.toString() });
  t.teardown(() => server.close());

  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, {
    claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true },
  });
  t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
  await insertSubscription(server, { state: SubscriptionState.ACTIVE });
  proxy.arm("license_sessions");
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, index) =>
      activate(server.baseUrl, { activationCode: code, fingerprint: `d-${index}` }),
    ),
  );
  t.is(proxy.cuts(), 1, "a group's COMMIT was cut");
  t.true(
    answers.every((answer) => answer.status === 200),
    JSON.stringify(answers.map((a) => a.status)),
  );
  const [listed] = (await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`)).body.items;
  t.is(listed.activationCodeUseCount, 21, "each device's activation counted once");
  const live = await rest(
    server.baseUrl,
    "GET",
    `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true&pageSize=100`,
  );
  const liveIds = new Set((live.body.items as { id: string }[]).map((session) => session.id));
  t.is(liveIds.size, 21);
  t.true(
    answers.every((answer) => liveIds.has(sessionIdOf(answer.body.licenseToken))),
    "every answered session is live",
  );
  const events = (await server.app.dataSource.query(
    "SELECT payload FROM webhook_events WHERE type = 'Entitlement.Activated' AND entity_id = ?",
    [entitlementId],
  )) as { payload: string }[];
  t.is(events.length, 20, "one event per activation");
});
