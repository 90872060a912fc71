import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import type { DataSource } from "typeorm";
import { catalogEntities } from "../../src/catalog/entities.js";
import { licensingEntities } from "../../src/licensing/entities.js";
import type { DatabaseConfig } from "../../src/platform/config.js";
import { createDataSource, migrate } from "../../src/platform/database.js";
import { FloatingSeatCounts1764777600000 } from "../../src/platform/migrations/0013-floating-seat-counts.js";
import { migrations } from "../../src/platform/migrations/index.js";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionCall, sessionIdOf } from "../support/licensing.js";
import { type ManualClock, manualClock } from "../support/manual-clock.js";
import { countMysqlQueries } from "../support/mysql-query-count.js";
import { rest } from "../support/rest.js";
import { createTestDatabase, startTestServer, type TestServer } from "../support/test-server.js";

// Seats and devices are counted instead of scanned (floating_seat_counts, entitlement_device_counts,
// activation_code_device_counts): these tests check each count against the sessions or devices themselves after
// every kind of change, including floating seats whose grace ran out unannounced.

interface Running {
  server: TestServer;
  clock: ManualClock;
}
interface Context {
  mysql: Running;
  /** A second instance on the same MySQL database and Redis, its clock started 30 s behind the first's. */
  mysqlBehind: Running;
  embedded: Running;
  database: { url: string; drop(): Promise<void> };
  folder: string;
}
const test = anyTest as TestFn<Context>;
const MODES = ["mysql", "embedded"] as const;

const LEASE_MS = 120_000;
const GRACE_MS = 60_000;
const POLICY = {
  claimBasedActivation: {
    numberOfSeats: 2,
    isFloatingLicense: true,
    leaseTime: "00:02:00",
    gracePeriod: "00:01:00",
    allowOffLineUse: true,
  },
};

/** Lapsed-seat looks sent by this process to MySQL. */
const lapsedLooks = countMysqlQueries(
  /SELECT id FROM license_sessions WHERE entitlement_id = \S+ AND holds_floating_seat/,
);

test.before(async (t) => {
  const start = Date.now();
  t.context.database = await createTestDatabase();
  t.context.folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-floating-seats-"));
  const started = async (clock: ManualClock, options: Parameters<typeof startTestServer>[0]) => ({
    clock,
    server: await startTestServer({ clock, ...options }),
  });
  const databaseUrl = t.context.database.url;
  t.context.mysql = await started(manualClock(start), { databaseUrl });
  t.context.mysqlBehind = await started(manualClock(start - 30_000), { databaseUrl });
  t.context.embedded = await started(manualClock(start), {
    embedded: { file: path.join(t.context.folder, "db.sqlite") },
  });
});

test.after.always(async (t) => {
  for (const running of [t.context.mysql, t.context.mysqlBehind, t.context.embedded]) await running?.server.close();
  await t.context.database?.drop();
  fs.rmSync(t.context.folder, { recursive: true, force: true });
});

/** The entitlement's count beside the sessions it counts, read from the database. */
async function seats(dataSource: DataSource, entitlementId: string) {
  const [count] = (await dataSource.query("SELECT held FROM floating_seat_counts WHERE entitlement_id = ?", [
    entitlementId,
  ])) as { held: number | string }[];
  const [holding] = (await dataSource.query(
    "SELECT COUNT(*) AS n FROM license_sessions WHERE entitlement_id = ? AND holds_floating_seat = 1 AND state = 1",
    [entitlementId],
  )) as { n: number | string }[];
  return { held: Number(count?.held ?? 0), holding: Number(holding.n) };
}

async function expectSeats(t: ExecutionContext, dataSource: DataSource, entitlementId: string, held: number) {
  t.deepEqual(await seats(dataSource, entitlementId), { held, holding: held });
}

const ENTITLEMENT = { devices: "entitlement_devices", counts: "entitlement_device_counts", owner: "entitlement_id" };
const CODE = {
  devices: "activation_code_devices",
  counts: "activation_code_device_counts",
  owner: "activation_code_id",
};

/** An owner's device count beside its devices. */
async function devices(dataSource: DataSource, ownerId: string, table = ENTITLEMENT) {
  const where = `WHERE ${table.owner} = ?`;
  const [count] = (await dataSource.query(`SELECT held FROM ${table.counts} ${where}`, [ownerId])) as {
    held: number | string;
  }[];
  const [rows] = (await dataSource.query(`SELECT COUNT(*) AS n FROM ${table.devices} ${where}`, [ownerId])) as {
    n: number | string;
  }[];
  return { held: Number(count?.held ?? 0), devices: Number(rows.n) };
}

async function expectDevices(
  t: ExecutionContext,
  dataSource: DataSource,
  ownerId: string,
  held: number,
  table = ENTITLEMENT,
) {
  t.deepEqual(await devices(dataSource, ownerId, table), { held, devices: held });
}

/** The id of the entitlement's one activation code. */
async function codeIdOf(dataSource: DataSource, entitlementId: string): Promise<string> {
  const [row] = (await dataSource.query("SELECT id FROM activation_codes WHERE entitlement_id = ?", [
    entitlementId,
  ])) as {
    id: string;
  }[];
  return row.id;
}

const LIMITED_CODE = { maxDeviceActivations: 2, useEntitlementMaxActivations: false };

const NODE_LOCKED = {
  claimBasedActivation: { numberOfSeats: 2, isFloatingLicense: false, isTransferableLicense: true },
};

function activated(t: ExecutionContext, answer: { status: number; body: Record<string, unknown> }): string {
  t.is(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.licenseToken as string;
}

/** Sets an entitlement's seats (count and kind) through the operational path, as a vendor does. */
async function setSeats(
  t: ExecutionContext,
  server: TestServer,
  entitlementId: string,
  seats: { numberOfSeats: number; isFloatingLicense: boolean },
) {
  const path = `/api/v1/provision/operational/entitlement/entitlements/${entitlementId}/policies/claim-based/seats`;
  const answer = await rest(server.baseUrl, "PUT", path, seats);
  t.is(answer.status, 200, JSON.stringify(answer.body));
}

function refusedForSeats(t: ExecutionContext, answer: { status: number; body: Record<string, unknown> }) {
  t.is(answer.status, 409, JSON.stringify(answer.body));
  t.is(answer.body.type, "urn:provision:problem:seat-limit-reached");
}

for (const mode of MODES) {
  test.serial(
    `a lapsed seat comes back at the next activation, and the count follows every change (${mode})`,
    async (t) => {
      const { server, clock } = t.context[mode];
      const { dataSource } = server.app;
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, POLICY);
      const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
      activated(t, await activation("a"));
      const b = activated(t, await activation("b"));
      refusedForSeats(t, await activation("c"));
      await expectSeats(t, dataSource, entitlementId, 2);

      // b renews; a does not, and its grace ends while nobody is looking.
      clock.advance(150_000);
      t.is((await sessionCall(server.baseUrl, b, "renew")).status, 200);
      clock.advance(LEASE_MS + GRACE_MS - 150_000 + 10_000);
      const looksBefore = lapsedLooks();
      const c = activated(t, await activation("c"));
      refusedForSeats(t, await activation("d"));
      if (mode === "mysql") t.is(lapsedLooks() - looksBefore, 1, "looked for lapsed seats once, then not again");
      await expectSeats(t, dataSource, entitlementId, 2);

      // Release and EndSession give a seat back; a device activating again keeps its one seat.
      t.is((await sessionCall(server.baseUrl, c, "release")).status, 200);
      t.is((await sessionCall(server.baseUrl, c, "release")).status, 200, "released again answers as the first");
      await expectSeats(t, dataSource, entitlementId, 1);
      const d = activated(t, await activation("d"));
      const ended = await rest(server.baseUrl, "DELETE", `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(d)}`);
      t.is(ended.status, 200);
      await expectSeats(t, dataSource, entitlementId, 1);
      activated(t, await activation("e"));
      activated(t, await activation("e"));
      await expectSeats(t, dataSource, entitlementId, 2);
      refusedForSeats(t, await activation("f"));
    },
  );

  test.serial(`under seats lowered below those in use, a device holding one activates again (${mode})`, async (t) => {
    const { server } = t.context[mode];
    const { dataSource } = server.app;
    for (const [policy, floating] of [
      [POLICY, true],
      [NODE_LOCKED, false],
    ] as const) {
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
      const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
      const a = activated(t, await activation("a"));
      activated(t, await activation("b"));
      await setSeats(t, server, entitlementId, { numberOfSeats: 1, isFloatingLicense: floating });
      refusedForSeats(t, await activation("c"));
      const again = activated(t, await activation("a"));
      t.is((await sessionCall(server.baseUrl, a, "check-in")).status, 401, "its earlier session ended");
      t.is((await sessionCall(server.baseUrl, again, "check-in")).status, 200);
      if (floating) await expectSeats(t, dataSource, entitlementId, 2);
      else await expectDevices(t, dataSource, entitlementId, 2);
      refusedForSeats(t, await activation("c"));
    }
  });

  test.serial(
    `under seats lowered below those in use, a device whose seat lapsed is a new one (${mode})`,
    async (t) => {
      const { server, clock } = t.context[mode];
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, {
        claimBasedActivation: { ...POLICY.claimBasedActivation, numberOfSeats: 3 },
      });
      const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
      activated(t, await activation("a"));
      const b = activated(t, await activation("b"));
      const c = activated(t, await activation("c"));
      await setSeats(t, server, entitlementId, { numberOfSeats: 2, isFloatingLicense: true });
      clock.advance(LEASE_MS * 0.75);
      const renewed = [];
      for (const token of [b, c]) renewed.push(activated(t, await sessionCall(server.baseUrl, token, "renew")));
      clock.advance(LEASE_MS * 0.25 + GRACE_MS + 1000);
      refusedForSeats(t, await activation("a"));
      for (const token of renewed) t.is((await sessionCall(server.baseUrl, token, "check-in")).status, 200);
    },
  );

  test.serial(
    `a switch to node-locked gives no seat to a device whose floating session lapsed (${mode})`,
    async (t) => {
      const { server, clock } = t.context[mode];
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, POLICY);
      const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
      activated(t, await activation("abandoned"));
      clock.advance(LEASE_MS + GRACE_MS + 1000);
      activated(t, await activation("b"));
      await setSeats(t, server, entitlementId, { numberOfSeats: 2, isFloatingLicense: false });
      await expectDevices(t, server.app.dataSource, entitlementId, 1);
      activated(t, await activation("c"));
      refusedForSeats(t, await activation("d"));
    },
  );

  test.serial(`a switch of what holds the seats counts the live sessions under the new kind (${mode})`, async (t) => {
    const { server } = t.context[mode];
    const { dataSource } = server.app;
    const kinds: [Record<string, unknown>, boolean, (id: string) => Promise<void>][] = [
      [POLICY, false, (id) => expectDevices(t, dataSource, id, 2)],
      [NODE_LOCKED, true, (id) => expectSeats(t, dataSource, id, 2)],
      [{}, true, (id) => expectSeats(t, dataSource, id, 2)],
      [{}, false, (id) => expectDevices(t, dataSource, id, 2)],
    ];
    for (const [policy, floatingAfter, counted] of kinds) {
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
      const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
      activated(t, await activation("a"));
      const b = activated(t, await activation("b"));
      await setSeats(t, server, entitlementId, { numberOfSeats: 2, isFloatingLicense: floatingAfter });
      await counted(entitlementId);
      refusedForSeats(t, await activation("c"));
      t.is(
        (await sessionCall(server.baseUrl, b, "renew")).status,
        200,
        "a session of before renews under the new kind",
      );
      activated(t, await activation("a"));
      if (floatingAfter) {
        t.is((await sessionCall(server.baseUrl, b, "release")).status, 200);
        activated(t, await activation("c"));
        refusedForSeats(t, await activation("d"));
        await expectSeats(t, dataSource, entitlementId, 2);
      }
    }
  });

  test.serial(`a renewal with a shorter lease is found lapsed when its new grace ends (${mode})`, async (t) => {
    const { server, clock } = t.context[mode];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, {
      claimBasedActivation: { ...POLICY.claimBasedActivation, numberOfSeats: 1 },
    });
    const a = activated(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "a" }));
    // A 10-second lease now ends a's grace well before the 3 minutes counted at activation.
    const renewed = await sessionCall(server.baseUrl, a, "renew", { requestedLeaseDuration: "10s" });
    t.is(renewed.status, 200, JSON.stringify(renewed.body));
    clock.advance(10_000 + GRACE_MS + 1_000);
    const oldToken = await sessionCall(server.baseUrl, a, "check-in");
    t.is(oldToken.status, 401, "the token from before the renewal outlives its session's grace, and is refused");
    t.is(oldToken.body.type, "urn:provision:problem:invalid-license-token");
    activated(t, await activate(server.baseUrl, { activationCode: code, fingerprint: "b" }));
    t.is((await sessionCall(server.baseUrl, a, "check-in")).status, 401, "also once its seat is taken back");
    await expectSeats(t, server.app.dataSource, entitlementId, 1);
  });
}

for (const mode of MODES) {
  test.serial(`node-locked devices are counted as they come and go (${mode})`, async (t) => {
    const { server } = t.context[mode];
    const { dataSource } = server.app;
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, NODE_LOCKED);
    const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
    const a = activated(t, await activation("a"));
    const b = activated(t, await activation("b"));
    refusedForSeats(t, await activation("c"));
    const aAgain = activated(t, await activation("a"));
    await expectDevices(t, dataSource, entitlementId, 2);

    // Released on a transferable license, b's seat comes back; ended by the vendor, so does a's.
    t.is((await sessionCall(server.baseUrl, b, "release")).status, 200);
    await expectDevices(t, dataSource, entitlementId, 1);
    activated(t, await activation("c"));
    await expectDevices(t, dataSource, entitlementId, 2);
    const ended = await rest(
      server.baseUrl,
      "DELETE",
      `${ENTITLEMENTS}/${entitlementId}/sessions/${sessionIdOf(aAgain)}`,
    );
    t.is(ended.status, 200);
    t.is((await sessionCall(server.baseUrl, a, "release")).status, 401, "a's first session ended when a came back");
    await expectDevices(t, dataSource, entitlementId, 1);
    activated(t, await activation("d"));
    refusedForSeats(t, await activation("e"));
    await expectDevices(t, dataSource, entitlementId, 2);
  });

  test.serial(`releasing a session activated before the seats were node-locked frees no seat (${mode})`, async (t) => {
    const { server } = t.context[mode];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, {});
    const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
    const x = activated(t, await activation("x"));
    const changed = await rest(server.baseUrl, "PUT", `${ENTITLEMENTS}/${entitlementId}`, {
      activationPolicy: NODE_LOCKED,
    });
    t.is(changed.status, 200);
    activated(t, await activation("w"));
    t.is((await sessionCall(server.baseUrl, x, "release")).status, 200);
    await expectDevices(t, server.app.dataSource, entitlementId, 1);
    activated(t, await activation("y"));
    refusedForSeats(t, await activation("z"));
    await expectDevices(t, server.app.dataSource, entitlementId, 2);
  });
}

for (const mode of MODES) {
  test.serial(`a code's devices are counted up to its limit (${mode})`, async (t) => {
    const { server } = t.context[mode];
    const { dataSource } = server.app;
    const floating = { claimBasedActivation: { ...POLICY.claimBasedActivation, numberOfSeats: 10 } };
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, floating, LIMITED_CODE);
    const activation = (fingerprint: string) => activate(server.baseUrl, { activationCode: code, fingerprint });
    activated(t, await activation("a"));
    activated(t, await activation("b"));
    const third = await activation("c");
    t.is(third.status, 409);
    t.is(third.body.type, "urn:provision:problem:device-limit-reached");
    activated(t, await activation("a"));
    await expectDevices(t, dataSource, await codeIdOf(dataSource, entitlementId), 2, CODE);
  });
}

test.serial("an instance whose clock is behind cannot renew a session whose seat another took back", async (t) => {
  const ahead = t.context.mysql;
  const behind = t.context.mysqlBehind;
  behind.clock.advance(ahead.clock.elapsedMs - behind.clock.elapsedMs);
  const { entitlementId, code } = await entitlementWithCode(ahead.server.baseUrl, {
    claimBasedActivation: { ...POLICY.claimBasedActivation, numberOfSeats: 1 },
  });
  const a = activated(t, await activate(ahead.server.baseUrl, { activationCode: code, fingerprint: "a" }));
  // Past a's grace on the first instance's clock; 20 s before it on the second's.
  for (const running of [ahead, behind]) running.clock.advance(LEASE_MS + GRACE_MS + 10_000);
  activated(t, await activate(ahead.server.baseUrl, { activationCode: code, fingerprint: "b" }));
  const renewal = await sessionCall(behind.server.baseUrl, a, "renew");
  t.is(renewal.status, 401, JSON.stringify(renewal.body));
  t.is(renewal.body.type, "urn:provision:problem:invalid-license-token");
  await expectSeats(t, ahead.server.app.dataSource, entitlementId, 1);
});

/**
 * Two floating sessions live and one released, three node-locked devices and a limited code's two, written before
 * migrations 0013–0015 ran: they count them.
 */
async function migratedFromBefore(t: ExecutionContext, config: DatabaseConfig, server: TestServer) {
  const floating = await entitlementWithCode(server.baseUrl, POLICY);
  const activation = (code: string, fingerprint: string) =>
    activate(server.baseUrl, { activationCode: code, fingerprint });
  activated(t, await activation(floating.code, "a"));
  const b = activated(t, await activation(floating.code, "b"));
  t.is((await sessionCall(server.baseUrl, b, "release")).status, 200);
  activated(t, await activation(floating.code, "c"));
  const nodeLocked = await entitlementWithCode(server.baseUrl, {
    claimBasedActivation: { ...NODE_LOCKED.claimBasedActivation, numberOfSeats: 5 },
  });
  for (const fingerprint of ["x", "y", "z"]) activated(t, await activation(nodeLocked.code, fingerprint));
  const limited = await entitlementWithCode(server.baseUrl, {}, { ...LIMITED_CODE, maxDeviceActivations: 5 });
  for (const fingerprint of ["p", "q"]) activated(t, await activation(limited.code, fingerprint));
  const limitedCodeId = await codeIdOf(server.app.dataSource, limited.entitlementId);
  await server.close();
  const entities = [...catalogEntities, ...licensingEntities];
  const dataSource = await createDataSource(config, entities, migrations).initialize();
  t.teardown(() => dataSource.destroy());
  // Undone down to before 0013, the later migrations with them, and applied again.
  const fromCounts = migrations.slice(migrations.indexOf(FloatingSeatCounts1764777600000));
  for (let undone = 0; undone < fromCounts.length; undone++) await dataSource.undoLastMigration();
  const runner = dataSource.createQueryRunner();
  t.false(await runner.hasTable("floating_seat_counts"));
  t.false(await runner.hasTable("entitlement_device_counts"));
  t.false(await runner.hasTable("activation_code_device_counts"));
  await runner.release();
  t.deepEqual(
    await migrate(dataSource),
    fromCounts.map((migration) => new migration().name),
  );
  await expectSeats(t, dataSource, floating.entitlementId, 2);
  await expectDevices(t, dataSource, nodeLocked.entitlementId, 3);
  await expectDevices(t, dataSource, limitedCodeId, 2, CODE);
}

test.serial("migrations 0013–0015 count the seats and devices held before them (mysql)", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const server = await startTestServer({ databaseUrl: database.url });
  await migratedFromBefore(t, { kind: "mysql", url: database.url }, server);
});

test.serial("migrations 0013–0015 count the seats and devices held before them (embedded)", async (t) => {
  const file = path.join(t.context.folder, "before-0013.sqlite");
  const server = await startTestServer({ embedded: { file } });
  await migratedFromBefore(t, { kind: "sqlite", file }, server);
});
