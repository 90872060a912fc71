import anyTest, { type TestFn } from "ava";
import { activate, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { countMysqlQueries } from "../support/mysql-query-count.js";
import { rest } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

// An activation sends the seat reads its code's last activation on this instance needed together with its
// locking reads. These tests change the policy between activations, so the plan an instance remembers is stale,
// and check that every answer is the one the new policy gives.
const test = anyTest as TestFn<BothDatabases>;

/**
 * The round trips activations send on MySQL: queries on the connections of this process naming the session table
 * or the floating seat counts.
 */
const sessionTableQueries = countMysqlQueries(/license_sessions|floating_seat_counts/);

test.before(async (t) => {
  Object.assign(t.context, await startOnBothDatabases());
});

test.after.always(async (t) => {
  await t.context.close?.();
});

function setPolicy(baseUrl: string, entitlementId: string, claimBasedActivation: Record<string, unknown>) {
  return rest(baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, { activationPolicy: { claimBasedActivation } });
}

async function statuses(baseUrl: string, code: string, devices: string[]): Promise<number[]> {
  const answers: number[] = [];
  for (const fingerprint of devices)
    answers.push((await activate(baseUrl, { activationCode: code, fingerprint })).status);
  return answers;
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: activations after a policy change are decided by the new policy`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const { entitlementId, code } = await entitlementWithCode(baseUrl, {
      claimBasedActivation: { numberOfSeats: 1, isFloatingLicense: true },
    });
    t.deepEqual(await statuses(baseUrl, code, ["a", "b"]), [200, 409]);

    // The same reads, another limit: the remembered plan's reads hold, and the new seat count decides.
    t.is((await setPolicy(baseUrl, entitlementId, { numberOfSeats: 3, isFloatingLicense: true })).status, 200);
    t.deepEqual(await statuses(baseUrl, code, ["b", "c", "d"]), [200, 200, 409]);

    // Node-locked reads other rows: the floating plan is stale. The devices of the three live sessions (a, b and
    // c's) hold seats for good now: over the new limit of 2, a new device is refused; one of them comes back.
    t.is((await setPolicy(baseUrl, entitlementId, { numberOfSeats: 2, isFloatingLicense: false })).status, 200);
    t.deepEqual(await statuses(baseUrl, code, ["e", "a", "e"]), [409, 200, 409]);

    // Back to floating, the node-locked plan remembered: the three live sessions (a's new one, b's and c's) are
    // counted afresh under the lock.
    t.is((await setPolicy(baseUrl, entitlementId, { numberOfSeats: 4, isFloatingLicense: true })).status, 200);
    t.deepEqual(await statuses(baseUrl, code, ["h", "i"]), [200, 409]);
  });
}

// Serial tests run before the others, alone: no other test's queries are counted.
test.serial("MySQL: a code's activations after its first send two round trips, not three", async (t) => {
  const { baseUrl } = t.context.servers.MySQL;
  const { code } = await entitlementWithCode(baseUrl, {
    claimBasedActivation: { numberOfSeats: 10, isFloatingLicense: true },
  });
  const tripsOf = async (fingerprint: string) => {
    const before = sessionTableQueries();
    t.is((await activate(baseUrl, { activationCode: code, fingerprint })).status, 200);
    return sessionTableQueries() - before;
  };
  t.is(await tripsOf("first"), 3);
  t.is(await tripsOf("second"), 2);
  t.is(await tripsOf("third"), 2);
});
