import anyTest, { type TestFn } from "ava";
import { fingerprintHash } from "../../src/licensing/license-claims.js";
import { CODE_DEVICES, deviceKey, SessionStore } from "../../src/licensing/session-store.js";
import { rowDate } from "../../src/platform/database.js";
import type { Statement } from "../../src/platform/statement-batch.js";
import { activate, entitlementWithCode } from "../support/licensing.js";
import { type BothDatabases, startOnBothDatabases, type TestServer } from "../support/test-server.js";

// The statements an activation group reads and writes with, each over several entitlements or codes at once, on
// both databases: each owner's rows are found and changed as its own, whatever else the statement names.
const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  Object.assign(t.context, await startOnBothDatabases());
});

test.after.always(async (t) => {
  await t.context.close?.();
});

const UNLIMITED_FLOATING = { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: true } };

/** Two entitlements with a code each; the first activated once by `used`, the second never. */
async function twoEntitlements(server: TestServer) {
  const first = await entitlementWithCode(server.baseUrl, UNLIMITED_FLOATING);
  const second = await entitlementWithCode(server.baseUrl, UNLIMITED_FLOATING);
  const activated = await activate(server.baseUrl, { activationCode: first.code, fingerprint: "used" });
  if (activated.status !== 200) throw new Error(`activation: ${JSON.stringify(activated.body)}`);
  const codeIdOf = async (entitlementId: string) => {
    const rows = await server.app.dataSource.query("SELECT id FROM activation_codes WHERE entitlement_id = ?", [
      entitlementId,
    ]);
    return (rows as { id: string }[])[0].id;
  };
  return {
    entitlementIds: [first.entitlementId, second.entitlementId],
    codeIds: [await codeIdOf(first.entitlementId), await codeIdOf(second.entitlementId)],
  };
}

for (const database of ["MySQL", "SQLite"] as const) {
  const setUp = async (server: TestServer) => {
    const store = new SessionStore(server.app.dataSource);
    const run = (statement: Statement) => server.app.dataSource.query(statement.sql, statement.parameters);
    return { store, run, ...(await twoEntitlements(server)) };
  };

  test.serial(`${database}: live sessions and floating seat counts of several entitlements`, async (t) => {
    const { store, run, entitlementIds } = await setUp(t.context.servers[database]);
    const [first, second] = entitlementIds;
    const [used, other] = [fingerprintHash("used"), fingerprintHash("other")];
    const live = await run(
      store.liveSessionsOfDevicesStatement([
        { ownerId: first, hashes: [used, other] },
        { ownerId: second, hashes: [used] },
      ]),
    );
    t.deepEqual([...store.deviceKeysOf(live, "entitlement_id")], [deviceKey(first, used)]);

    const seats = store.floatingSeats;
    const counts = seats.countsOf(await run(seats.countsStatement(entitlementIds)), entitlementIds);
    t.like(counts.get(first), { held: 1 });
    t.like(counts.get(second), { held: 0, earliestEnd: null });
    const end = new Date("2031-05-06T07:08:09.000Z");
    counts.set(first, { held: 5, earliestEnd: end });
    counts.set(second, { held: 2, earliestEnd: end });
    await run(seats.storeStatement(counts));
    const again = seats.countsOf(await run(seats.countsStatement(entitlementIds)), entitlementIds);
    t.deepEqual(
      entitlementIds.map((id) => [again.get(id)?.held, again.get(id)?.earliestEnd?.toISOString()]),
      [
        [5, end.toISOString()],
        [2, end.toISOString()],
      ],
    );
  });

  test.serial(`${database}: uses, devices and device counts of several codes`, async (t) => {
    const { store, run, codeIds } = await setUp(t.context.servers[database]);
    const [first, second] = codeIds;
    const secondFirstUse = new Date("2030-01-02T03:04:05.000Z");
    await run(
      store.recordCodeUsesStatement([
        { codeId: first, consented: false, firstAt: new Date("2030-09-09T09:09:09.000Z"), uses: 2 },
        { codeId: second, consented: true, firstAt: secondFirstUse, uses: 3 },
      ]),
    );
    const codes = (await run({
      sql: "SELECT id, activation_code_use_count AS uses, user_consent AS consent, activation_time_stamp AS at FROM activation_codes WHERE id IN (?, ?)",
      parameters: codeIds,
    })) as { id: string; uses: number | string; consent: unknown; at: unknown }[];
    const byId = new Map(codes.map((row) => [row.id, row]));
    const [firstRow, secondRow] = codeIds.map((id) => byId.get(id));
    t.is(Number(firstRow?.uses), 3, "one activation, then two");
    t.false(Boolean(Number(firstRow?.consent)));
    t.true((rowDate(firstRow?.at) as Date) < new Date("2030-01-01"), "the first use stays the first");
    t.is(Number(secondRow?.uses), 3);
    t.true(Boolean(Number(secondRow?.consent)));
    t.is(rowDate(secondRow?.at)?.toISOString(), secondFirstUse.toISOString());

    const now = new Date();
    const device = (ownerId: string, fingerprint: string) => ({
      ownerId,
      fingerprint,
      fingerprintHash: fingerprintHash(fingerprint),
      activationCodeId: ownerId,
      now,
    });
    await run(store.addDevicesStatement(CODE_DEVICES, [device(first, "a"), device(first, "b"), device(second, "c")]));
    await run(
      store.countDevicesStatement(CODE_DEVICES, [
        { ownerId: first, added: 2 },
        { ownerId: second, added: 1 },
      ]),
    );
    await run(store.countDevicesStatement(CODE_DEVICES, [{ ownerId: first, added: 4 }]));
    const held = store.heldByOwnerOf(await run(store.deviceCountStatement(CODE_DEVICES, codeIds)));
    t.deepEqual(
      codeIds.map((id) => held.get(id)),
      [6, 1],
    );
    const hashes = ["used", "a", "c"].map(fingerprintHash);
    const owned = await run(
      store.ownedDevicesStatement(CODE_DEVICES, [
        { ownerId: first, hashes },
        { ownerId: second, hashes },
      ]),
    );
    t.deepEqual(
      [...store.deviceKeysOf(owned, CODE_DEVICES.owner)].sort(),
      [deviceKey(first, hashes[0]), deviceKey(first, hashes[1]), deviceKey(second, hashes[2])].sort(),
    );
  });
}

test.serial("MySQL: the entitlements' lock passes over one another transaction holds, when asked to", async (t) => {
  const server = t.context.servers.MySQL;
  const store = new SessionStore(server.app.dataSource);
  const [held, free] = (await twoEntitlements(server)).entitlementIds;
  const holder = server.app.dataSource.createQueryRunner();
  const reader = server.app.dataSource.createQueryRunner();
  await holder.startTransaction();
  await reader.startTransaction();
  try {
    await holder.query("SELECT id FROM entitlements WHERE id = ? FOR UPDATE", [held]);
    const { sql, parameters } = store.entitlementsStatement([held, free].sort(), true);
    const rows = store.entitlementsOf(await reader.query(sql, parameters));
    t.deepEqual(
      rows.map((row) => row.id),
      [free],
    );
    await t.throwsAsync(
      holder.query("SELECT id FROM entitlements WHERE id = ? FOR UPDATE NOWAIT", [free]),
      {
        message: /lock/i,
      },
      "the row read is locked",
    );
  } finally {
    await holder.rollbackTransaction();
    await reader.rollbackTransaction();
    await holder.release();
    await reader.release();
  }
});
