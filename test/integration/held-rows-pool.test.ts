import test from "ava";
import mysql from "mysql2/promise";
import { requestToken } from "../support/auth.js";
import { counted, settle, unlessStalled } from "../support/held-locks.js";
import { activate, codesPath, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import {
  API_CALLS,
  meteredEntitlement,
  meteredSession,
  preallocate,
  sendUsage,
  usageItems,
} from "../support/metering.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase, startTestServer } from "../support/test-server.js";

const FLOATING = { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true } };

/** An operator's session on its own connection, holding the rows until `release`. */
async function holdRows(databaseUrl: string, lockingSelects: [string, unknown[]][]) {
  const operator = await mysql.createConnection({ uri: databaseUrl });
  await operator.query("START TRANSACTION");
  for (const [sql, parameters] of lockingSelects) await operator.query(sql, parameters);
  return {
    release: async () => {
      await operator.query("COMMIT");
      await operator.end();
    },
  };
}

// Each kind of wait on rows held elsewhere is bounded on its own (lone entitlement transactions, activation and
// pre-allocation lanes, usage batches); all of them at once must still leave connections to every other request.
test("rows held elsewhere for licensing and usage at once leave the pool to every other request", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const server = await startTestServer({ databaseUrl: database.url });
  t.teardown(() => server.close());

  const entitlements: { entitlementId: string; code: string; newCodes: string[] }[] = [];
  for (let index = 0; index < 6; index++) {
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING);
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    const newCodes: string[] = [];
    for (let issued = 0; issued < 2; issued++) {
      newCodes.push((await rest(server.baseUrl, "POST", codesPath(entitlementId), {})).body.activationCode);
    }
    entitlements.push({ entitlementId, code, newCodes });
  }
  const metered = [];
  for (let index = 0; index < 3; index++) {
    const entitlement = await meteredEntitlement(server.baseUrl, [API_CALLS]);
    const session = await meteredSession(server.baseUrl, entitlement);
    t.true((await preallocate(server.baseUrl, session, "api-calls", 1)).body.granted);
    metered.push({ entitlement, session });
  }
  const entitlementIds = entitlements.map((each) => each.entitlementId);
  const meteredIds = metered.map((each) => each.entitlement.entitlementId);
  const operator = await holdRows(database.url, [
    // By its primary key: a scan of this small table would lock other rows too.
    ["SELECT id FROM entitlements FORCE INDEX (PRIMARY) WHERE id IN (?) FOR UPDATE", [entitlementIds]],
    ["SELECT entitlement_id FROM usage_periods WHERE entitlement_id IN (?) FOR UPDATE", [meteredIds]],
  ]);
  const [usage, ...grants] = metered;
  const held = counted([
    // A code's first activation on an instance runs alone; later ones are grouped, and go to a lane when held.
    ...entitlements.flatMap(({ newCodes }) =>
      newCodes.map((activationCode) => () => activate(server.baseUrl, { activationCode, fingerprint: "lone" })),
    ),
    ...entitlements.flatMap(({ code }) =>
      [1, 2, 3].map((device) => () => activate(server.baseUrl, { activationCode: code, fingerprint: `d-${device}` })),
    ),
    ...Array.from(
      { length: 10 },
      (_, index) => () => sendUsage(server.baseUrl, usage.session, usageItems("api-calls", [1], 100 + index)),
    ),
    ...grants.flatMap(({ session }) =>
      Array.from({ length: 10 }, () => () => preallocate(server.baseUrl, session, "api-calls", 1)),
    ),
  ]);
  try {
    // The lone activations' first attempts give up their one-second lock waits and queue for the bounded turns.
    await settle(2500);
    const others = await unlessStalled(
      Promise.all([
        requestToken(server.baseUrl, server.admin.clientId, server.admin.clientSecret),
        rest(server.baseUrl, "GET", `${PRODUCTS}?pageSize=5`),
        rest(server.baseUrl, "GET", `${ENTITLEMENTS}?pageSize=5`),
      ]),
    );
    t.not(others, "stalled", "requests needing no held row answered while the rows were held");
    if (others !== "stalled")
      t.deepEqual(
        others.map((answer) => answer.status),
        [200, 200, 200],
      );
    t.is(held.answered(), 0, "the requests needing held rows waited for them");
  } finally {
    await operator.release();
  }
  const answers = await held.all;
  t.deepEqual(
    answers.filter((answer) => answer.status !== 200).map((answer) => answer.body),
    [],
    "every held request answered once the rows were free",
  );
});
