import anyTest, { type TestFn } from "ava";
import { activate, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

// Three instances on one MySQL database and Redis, each with its own connection pool and caches: seats are
// counted under the entitlement's row lock in MySQL, so no instance can see a stale count.
const test = anyTest as TestFn<{ servers: TestServer[]; drop: () => Promise<void> }>;
const ACTIVATIONS = 200;
const SEATS = 10;

test.before(async (t) => {
  const database = await createTestDatabase();
  t.context.drop = database.drop;
  t.context.servers = [];
  for (let index = 0; index < 3; index++) {
    t.context.servers.push(await startTestServer({ databaseUrl: database.url }));
  }
});

test.after.always(async (t) => {
  for (const server of t.context.servers ?? []) await server.close();
  await t.context.drop?.();
});

/** `count` activations with distinct devices, spread over the instances, all at once; answers their statuses. */
async function race(
  servers: TestServer[],
  code: string,
  count: number,
  fingerprint = (index: number) => `device-${index}`,
) {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, index) =>
      activate(servers[index % servers.length].baseUrl, { activationCode: code, fingerprint: fingerprint(index) }),
    ),
  );
  return answers.map((answer) => answer.status);
}

function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

for (const floating of [true, false]) {
  test.serial(
    `${ACTIVATIONS} racing activations on three instances take exactly ${SEATS} ${floating ? "floating" : "node-locked"} seats`,
    async (t) => {
      const { servers } = t.context;
      const policy = { claimBasedActivation: { numberOfSeats: SEATS, isFloatingLicense: floating } };
      const { entitlementId, code } = await entitlementWithCode(servers[0].baseUrl, policy);
      t.deepEqual(tally(await race(servers, code, ACTIVATIONS)), { 200: SEATS, 409: ACTIVATIONS - SEATS });
      const live = await rest(
        servers[1].baseUrl,
        "GET",
        `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true&pageSize=100`,
      );
      t.is(live.body.totalCount, SEATS);
      const codes = await rest(servers[2].baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
      t.is(codes.body.items[0].activationCodeUseCount, SEATS, "the code's use count is exact too");
    },
  );
}

test.serial("the same device racing itself on three instances holds one seat", async (t) => {
  const { servers } = t.context;
  const policy = { claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: false } };
  const { entitlementId, code } = await entitlementWithCode(servers[0].baseUrl, policy);
  const statuses = await race(servers, code, 30, () => "one-device");
  t.deepEqual(tally(statuses), { 200: 30 });
  const live = await rest(servers[0].baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true`);
  t.is(live.body.totalCount, 1, "each activation ended the device's previous session");
});

test.serial("a code's device limit holds under racing activations", async (t) => {
  const { servers } = t.context;
  const { code } = await entitlementWithCode(
    servers[0].baseUrl,
    { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true } },
    { maxDeviceActivations: 5 },
  );
  t.deepEqual(tally(await race(servers, code, 60)), { 200: 5, 409: 55 });
});

test.serial("a code's use limit holds under racing activations on three instances", async (t) => {
  const { servers } = t.context;
  const { entitlementId, code } = await entitlementWithCode(
    servers[0].baseUrl,
    { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true } },
    { useEntitlementMaxActivations: true, maxActivationCodeUseCount: 6 },
  );
  t.deepEqual(tally(await race(servers, code, 60)), { 200: 6, 409: 54 });
  const codes = await rest(servers[1].baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
  t.is(codes.body.items[0].activationCodeUseCount, 6);
});
