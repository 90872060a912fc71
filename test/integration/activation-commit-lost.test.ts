import test, { type ExecutionContext } from "ava";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { startCuttingProxy } from "../support/cutting-proxy.js";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionCall, sessionIdOf } from "../support/licensing.js";
import { rest } from "../support/rest.js";
import { startBehindProxy } from "../support/test-server.js";
import { insertSubscription } from "../support/webhooks.js";

/** A test server on a database of its own, reached through a cutting proxy; all three go with the test. */
async function serverBehindCuttingProxy(t: ExecutionContext) {
  const { server, proxy, close } = await startBehindProxy(startCuttingProxy);
  t.teardown(close);
  return { server, proxy };
}

// The connection to MySQL lost between a group's COMMIT and its answer: the group may have committed, and must
// not be written a second time (each activation alone), which would count every device's code use twice.
test("a group whose COMMIT's answer is lost answers each activation once, counted once", async (t) => {
  const { server, proxy } = await serverBehindCuttingProxy(t);

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

// A device activating again ends its earlier session in the same transaction: when that COMMIT's answer is lost,
// the earlier session, which this instance keeps in memory for its check-ins, must be looked at again.
test("a device's activation again whose COMMIT's answer is lost: its earlier session's state is read again", async (t) => {
  const { server, proxy } = await serverBehindCuttingProxy(t);

  const { entitlementId, code } = await entitlementWithCode(server.baseUrl, {
    claimBasedActivation: { numberOfSeats: 2, isFloatingLicense: false },
  });
  const first = await activate(server.baseUrl, { activationCode: code, fingerprint: "laptop" });
  t.is(first.status, 200);
  const earlier = sessionIdOf(first.body.licenseToken);
  // Kept in memory: the checked-in session (and whatever invalidation the activation sent has arrived).
  for (let round = 0; round < 3; round++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.is((await sessionCall(server.baseUrl, first.body.licenseToken, "check-in")).status, 200);
  }

  proxy.arm("license_sessions", "laptop");
  const again = await activate(server.baseUrl, { activationCode: code, fingerprint: "laptop" });
  t.is(proxy.cuts(), 1);
  t.is(again.status, 503, JSON.stringify(again.body));
  t.is(again.body.type, "urn:provision:problem:outcome-unknown");

  const [row] = (await server.app.dataSource.query("SELECT state FROM license_sessions WHERE id = ?", [earlier])) as {
    state: number;
  }[];
  const checkIn = await sessionCall(server.baseUrl, first.body.licenseToken, "check-in");
  if (row.state === 1) t.is(checkIn.status, 200, "not committed: the earlier session still runs");
  else t.is(checkIn.status, 401, `committed (state ${row.state}): the earlier session's token is refused`);
  const live = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true`);
  t.is(live.body.items.length, 1, "one seat for the device either way");
});
