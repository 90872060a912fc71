import anyTest, { type TestFn } from "ava";
import { SubscriptionState } from "../../gen/provision/v1/webhook_pb.js";
import { accessToken } from "../support/auth.js";
import { counted, lockElsewhere, queueForLock, settle, unlessStalled } from "../support/held-locks.js";
import {
  activate,
  codesPath,
  ENTITLEMENTS,
  entitlementWithCode,
  licenseClaimsOf,
  sessionCall,
  setProductStatus,
} from "../support/licensing.js";
import { countMysqlQueries } from "../support/mysql-query-count.js";
import { createProviderWithClient } from "../support/providers.js";
import { PRODUCTS, rest } from "../support/rest.js";
import { type BothDatabases, startOnBothDatabases, type TestServer } from "../support/test-server.js";
import { insertSubscription } from "../support/webhooks.js";

// Activations arriving together are decided and written as one group, whichever entitlements they activate: each
// still answers as it would alone, and every count (seats, code uses, devices) is exact.
const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  Object.assign(t.context, await startOnBothDatabases());
});

test.after.always(async (t) => {
  await t.context.close?.();
});

const FLOATING = (seats: number) => ({ claimBasedActivation: { numberOfSeats: seats, isFloatingLicense: true } });

type Body = Record<string, unknown>;

/** All at once; answers each status and body, in order. */
function race(server: TestServer, bodies: Body[]) {
  return Promise.all(bodies.map((body) => activate(server.baseUrl, body)));
}

/** `count` activations of `code`, each with a device of its own (`device-0`, `device-1`, …). */
function freshDevices(code: string, count: number): Body[] {
  return Array.from({ length: count }, (_, index) => ({ activationCode: code, fingerprint: `device-${index}` }));
}

/** Whether every 409 among the answers is the problem `slug`. */
function refusedAs(answers: { status: number; body: { type?: string } }[], slug: string): boolean {
  return answers.filter((answer) => answer.status === 409).every((answer) => answer.body.type?.endsWith(slug));
}

function tally(answers: { status: number }[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

async function codesOf(server: TestServer, entitlementId: string) {
  const listed = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes`);
  return listed.body.items as {
    activationCode: string;
    activationCodeUseCount: number;
    maxActivationCodeUseCount: number;
    registeredFingerprints: string[];
  }[];
}

async function liveSessions(server: TestServer, entitlementId: string): Promise<number> {
  const live = await rest(
    server.baseUrl,
    "GET",
    `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true&pageSize=100`,
  );
  return live.body.totalCount;
}

/** An entitlement of another provider, with the code's first activation done (its seat plan known). */
async function otherProvidersEntitlement(server: TestServer, policy: Record<string, unknown>) {
  const tenant = await createProviderWithClient(server);
  const authorization = `Bearer ${await accessToken(server.baseUrl, tenant.clientId, tenant.clientSecret)}`;
  const created = await entitlementWithCode(server.baseUrl, policy, undefined, {}, { authorization });
  return { ...created, providerId: tenant.providerId, authorization };
}

async function activatedEvents(server: TestServer, entitlementId: string): Promise<number> {
  const [row] = (await server.app.dataSource.query(
    "SELECT COUNT(*) AS n FROM webhook_events WHERE type = 'Entitlement.Activated' AND entity_id = ?",
    [entitlementId],
  )) as { n: number | string }[];
  return Number(row.n);
}

/** Another transaction holding the entitlement's row lock until `release`. */
function lockEntitlementElsewhere(server: TestServer, entitlementId: string) {
  return lockElsewhere(server, "SELECT id FROM entitlements WHERE id = ? FOR UPDATE", [entitlementId]);
}

const SUSPENDED = 4;

function problemOf(answer: { body: { type?: string } }): string | undefined {
  return answer.body.type?.replace("urn:provision:problem:", "");
}

/** Each pooled connection's lock-wait timeout, as the server's or not (more queries at once than connections). */
async function lockWaitTimeoutsOfPool(server: TestServer) {
  const rows = await Promise.all(
    Array.from({ length: 30 }, () =>
      server.app.dataSource.query(
        "SELECT @@session.innodb_lock_wait_timeout = @@global.innodb_lock_wait_timeout AS same, SLEEP(0.05) AS slept",
      ),
    ),
  );
  return [...new Set(rows.map(([row]) => (Number(row.same) === 1 ? "as configured" : "changed")))];
}

/** The server's lock-wait timeout (`innodb_lock_wait_timeout`), in seconds. */
async function serverLockWaitSeconds(server: TestServer): Promise<number> {
  const [row] = (await server.app.dataSource.query("SELECT @@GLOBAL.innodb_lock_wait_timeout AS seconds")) as {
    seconds: number | string;
  }[];
  return Number(row.seconds);
}

test.serial(
  "MySQL: activations of an entitlement whose lock stays held through the lock wait answer 503",
  async (t) => {
    const server = t.context.servers.MySQL;
    const waitSeconds = await serverLockWaitSeconds(server);
    t.timeout((waitSeconds + 40) * 1000);
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(0));
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    const lock = await lockEntitlementElsewhere(server, entitlementId);
    try {
      // Held for the whole wait (50 s by default): the lane's wait runs out, and its activations answer that.
      const given = new Promise<"stalled">((resolve) =>
        setTimeout(() => resolve("stalled"), (waitSeconds + 20) * 1000),
      );
      const answers = await Promise.race([race(server, freshDevices(code, 10)), given]);
      t.not(answers, "stalled", "answered while the lock is still held, not when it is let go");
      if (answers !== "stalled") {
        t.deepEqual(tally(answers), { 503: 10 });
        t.true(answers.every((answer) => answer.body.type === "urn:provision:problem:database-busy"));
        t.is(server.app.activationGroups.refusedBusy, 0, "the refusal is forgotten once its lane has emptied");
      }
    } finally {
      await lock.release();
    }
    t.is(await liveSessions(server, entitlementId), 1, "nothing of them was written");
  },
);

for (const database of ["MySQL", "SQLite"] as const) {
  test.serial(
    `${database}: racing activations over several entitlements and providers keep each entitlement's limits exact`,
    async (t) => {
      const server = t.context.servers[database];
      const nodeLocked = { claimBasedActivation: { numberOfSeats: 4, isFloatingLicense: false } };
      const other = await otherProvidersEntitlement(server, FLOATING(6));
      const entitlements = [
        await entitlementWithCode(server.baseUrl, FLOATING(5)),
        await entitlementWithCode(server.baseUrl, nodeLocked),
        await entitlementWithCode(server.baseUrl, FLOATING(0), { maxDeviceActivations: 3 }),
        other,
      ];
      await insertSubscription(server, { state: SubscriptionState.ACTIVE, providerId: other.providerId });
      for (const { code } of entitlements) {
        t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
      }
      const answers = await race(
        server,
        // Each device activates on all four entitlements: a seat on each.
        Array.from({ length: 80 }, (_, index) => ({
          activationCode: entitlements[index % 4].code,
          fingerprint: `device-${Math.floor(index / 4)}`,
        })),
      );
      const of = (which: number) => answers.filter((_, index) => index % 4 === which);
      t.deepEqual(tally(of(0)), { 200: 4, 409: 16 }, "floating seats");
      t.deepEqual(tally(of(1)), { 200: 3, 409: 17 }, "node-locked seats");
      t.deepEqual(tally(of(2)), { 200: 2, 409: 18 }, "the code's own device limit");
      t.deepEqual(tally(of(3)), { 200: 5, 409: 15 }, "another provider's floating seats");
      t.true(refusedAs(of(2), "device-limit-reached"));
      for (const answer of answers.filter(({ status }) => status === 200)) {
        t.true(JSON.stringify(licenseClaimsOf(answer.body.licenseToken)).includes("export"), "the license's features");
      }
      const headers = (which: number): Record<string, string> =>
        which === 3 ? { authorization: other.authorization } : {};
      for (const [which, seats] of [5, 4, 3, 6].entries()) {
        const { entitlementId } = entitlements[which];
        const live = await rest(
          server.baseUrl,
          "GET",
          `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true&pageSize=100`,
          undefined,
          headers(which),
        );
        t.is(live.body.totalCount, seats, `entitlement ${which}: live sessions`);
        const codes = await rest(
          server.baseUrl,
          "GET",
          `${ENTITLEMENTS}/${entitlementId}/activation-codes`,
          undefined,
          headers(which),
        );
        t.is(codes.body.items[0].activationCodeUseCount, seats, `entitlement ${which}: code uses`);
      }
      t.is(await activatedEvents(server, entitlements[0].entitlementId), 0, "no subscription, no event");
      t.is(await activatedEvents(server, other.entitlementId), 6, "one event per activation of the subscriber");
    },
  );

  // SQLite's driver answers each group at once, so activations seldom wait for one there. Whether a race forms a
  // group of two entitlements depends on arrivals overlapping a group in flight (one race of 80 on a loaded CI
  // machine formed none), so this races again, a few times at most, until one does.
  if (database === "MySQL") {
    test.serial(`${database}: racing activations of different entitlements share a group`, async (t) => {
      const server = t.context.servers[database];
      const codes: string[] = [];
      for (let entitlement = 0; entitlement < 4; entitlement++) {
        const { code } = await entitlementWithCode(server.baseUrl, FLOATING(0));
        t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
        codes.push(code);
      }
      for (let round = 0; round < 10 && server.app.activationGroups.widest < 2; round++) {
        const answers = await race(
          server,
          Array.from({ length: 80 }, (_, index) => ({
            activationCode: codes[index % codes.length],
            fingerprint: `round-${round}-${index}`,
          })),
        );
        t.deepEqual(tally(answers), { 200: 80 });
      }
      const { widest } = server.app.activationGroups;
      t.true(widest >= 2, `the widest group held ${widest} entitlements`);
    });
  }

  // A group reads the product statuses it misses (see ProductStatuses) in one statement for all its entitlements,
  // not one round trip each with every lock held. Each entitlement here has a product of its own, so a status read
  // naming two products served two entitlements; a change to each product before each race drops its status.
  if (database === "MySQL") {
    test.serial(`${database}: a group reads its entitlements' missing product statuses at once`, async (t) => {
      const server = t.context.servers[database];
      const made: { code: string; productId: string }[] = [];
      for (let entitlement = 0; entitlement < 4; entitlement++) {
        const { code, productId } = await entitlementWithCode(server.baseUrl, FLOATING(0));
        t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
        made.push({ code, productId });
      }
      // The last entitlement's product is suspended: only its activations are refused, whatever the group.
      await setProductStatus(server.baseUrl, made[3].productId, SUSPENDED);
      const statusReadsOfSeveral = countMysqlQueries("FROM products WHERE (provider_id, id) IN ((?, ?), (?, ?)");
      for (let round = 0; round < 10 && statusReadsOfSeveral() === 0; round++) {
        for (const { productId } of made) {
          const changed = await rest(server.baseUrl, "PUT", `${PRODUCTS}/${productId}`, { description: `${round}` });
          t.is(changed.status, 200);
        }
        const answers = await race(
          server,
          Array.from({ length: 80 }, (_, index) => ({
            activationCode: made[index % made.length].code,
            fingerprint: `statuses-${round}-${index}`,
          })),
        );
        t.deepEqual(tally(answers), { 200: 60, 403: 20 });
        const refused = answers.flatMap((answer, index) => (answer.status === 403 ? [index % made.length] : []));
        t.deepEqual([...new Set(refused)], [3], "only the suspended product's entitlement is refused");
        t.true(answers.every((answer) => answer.status === 200 || problemOf(answer) === "product-unavailable"));
      }
      t.true(statusReadsOfSeveral() > 0, "no status read named the products of two entitlements");
    });
  }

  // Another transaction (an instance stalled mid-activation, an operator's session) holding one entitlement's row
  // must not hold up the activations of the entitlements grouped with it, nor take a connection for each of its
  // own waiting requests. SQLite writes one transaction at a time: nothing is held there while a group waits.
  if (database === "MySQL") {
    test.serial(`${database}: an entitlement locked elsewhere holds up its own activations only`, async (t) => {
      const server = t.context.servers[database];
      const entitlements = [];
      for (let entitlement = 0; entitlement < 3; entitlement++) {
        const created = await entitlementWithCode(server.baseUrl, FLOATING(0));
        t.is((await activate(server.baseUrl, { activationCode: created.code, fingerprint: "first" })).status, 200);
        entitlements.push(created);
      }
      const [held, ...free] = entitlements;
      const lock = await lockEntitlementElsewhere(server, held.entitlementId);
      // More than the connection pool holds: were each waiting on its own connection, none would be left.
      const heldRequests = counted(freshDevices(held.code, 30).map((body) => () => activate(server.baseUrl, body)));
      try {
        const freeAnswers = await unlessStalled(
          race(
            server,
            Array.from({ length: 60 }, (_, index) => ({
              activationCode: free[index % 2].code,
              fingerprint: `f-${index}`,
            })),
          ),
        );
        t.not(freeAnswers, "stalled", "the other entitlements' activations answered while the lock was held");
        t.is(heldRequests.answered(), 0, "the locked entitlement's activations waited for its lock");
        if (freeAnswers !== "stalled") t.deepEqual(tally(freeAnswers), { 200: 60 });
      } finally {
        await lock.release();
      }
      t.deepEqual(tally(await heldRequests.all), { 200: 30 });
      t.is(await liveSessions(server, held.entitlementId), 31);
    });

    test.serial(
      `${database}: lone activations of many entitlements locked elsewhere leave the pool to the others`,
      async (t) => {
        const server = t.context.servers[database];
        const free = await entitlementWithCode(server.baseUrl, FLOATING(0));
        t.is((await activate(server.baseUrl, { activationCode: free.code, fingerprint: "first" })).status, 200);
        // Six entitlements, two new codes each: a code's first activation on an instance runs alone, two at a time
        // per entitlement, so twelve would wait at once for the six rows, more than the pool's ten connections.
        const held: string[] = [];
        const newCodes: string[] = [];
        for (let entitlement = 0; entitlement < 6; entitlement++) {
          const { entitlementId } = await entitlementWithCode(server.baseUrl, FLOATING(0));
          held.push(entitlementId);
          for (let code = 0; code < 2; code++) {
            const issued = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
              useEntitlementMaxActivations: true,
            });
            newCodes.push(issued.body.activationCode);
          }
        }
        const freeNewCode = (await rest(server.baseUrl, "POST", codesPath(free.entitlementId), {})).body.activationCode;
        // By its primary key: a scan of this small table would lock other rows too.
        const lock = await lockElsewhere(
          server,
          `SELECT id FROM entitlements FORCE INDEX (PRIMARY) WHERE id IN (${held.map(() => "?").join(", ")}) FOR UPDATE`,
          held,
        );
        const heldRequests = counted(
          newCodes.map((activationCode) => () => activate(server.baseUrl, { activationCode, fingerprint: "lone" })),
        );
        try {
          const freeAnswers = await unlessStalled(
            race(server, [...freshDevices(free.code, 30), { activationCode: freeNewCode, fingerprint: "lone" }]),
          );
          t.not(freeAnswers, "stalled", "the other entitlement's activations answered while the six were held");
          t.is(heldRequests.answered(), 0, "the held entitlements' activations waited for their locks");
          if (freeAnswers !== "stalled") t.deepEqual(tally(freeAnswers), { 200: 31 }, "its lone one did not queue");
        } finally {
          await lock.release();
        }
        t.deepEqual(tally(await heldRequests.all), { 200: 12 });
      },
    );

    // When a group commits, InnoDB may grant a row it held to a transaction that queued for it before the next
    // group did: the next group must not wait on that transaction (nor, behind it, every group after it).
    test.serial(`${database}: a lock taken between two groups holds up its own entitlement only`, async (t) => {
      const server = t.context.servers[database];
      const contested = await entitlementWithCode(server.baseUrl, FLOATING(0));
      const other = await entitlementWithCode(server.baseUrl, FLOATING(0));
      for (const { code } of [contested, other]) {
        t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
      }
      // The first group locks the contested entitlement, then waits for its code, held here.
      const codeLock = await lockElsewhere(
        server,
        "SELECT id FROM activation_codes WHERE entitlement_id = ? FOR UPDATE",
        [contested.entitlementId],
      );
      const first = activate(server.baseUrl, { activationCode: contested.code, fingerprint: "one" });
      await settle();
      const operator = queueForLock(server, "SELECT id FROM entitlements WHERE id = ? FOR UPDATE", [
        contested.entitlementId,
      ]);
      await settle();
      const second = counted([() => activate(server.baseUrl, { activationCode: contested.code, fingerprint: "two" })]);
      await settle();
      try {
        await codeLock.release();
        t.is((await first).status, 200);
        await operator.granted;
        t.is(second.answered(), 0, "the operator's transaction took the lock before the second group");
        const otherAnswer = await unlessStalled(
          activate(server.baseUrl, { activationCode: other.code, fingerprint: "three" }),
        );
        t.not(otherAnswer, "stalled", "the other entitlement's activation answered while the operator held the lock");
        if (otherAnswer !== "stalled") t.is(otherAnswer.status, 200);
        t.is(second.answered(), 0, "the contested entitlement's activation waits for the operator");
      } finally {
        await operator.release();
      }
      t.deepEqual(tally(await second.all), { 200: 1 });
      t.is(await liveSessions(server, contested.entitlementId), 3);
      t.deepEqual(await lockWaitTimeoutsOfPool(server), ["as configured"], "the group's short lock wait was set back");
    });

    test.serial(
      `${database}: releases and lone activations of an entitlement locked elsewhere leave the pool to the others`,
      async (t) => {
        const server = t.context.servers[database];
        const held = await entitlementWithCode(server.baseUrl, FLOATING(0));
        const free = await entitlementWithCode(server.baseUrl, FLOATING(0));
        t.is((await activate(server.baseUrl, { activationCode: free.code, fingerprint: "first" })).status, 200);
        const activated = await race(server, freshDevices(held.code, 20));
        t.deepEqual(tally(activated), { 200: 20 });
        const tokens = activated.map(({ body }) => body.licenseToken as string);
        // A code's first activation on an instance runs alone, in a transaction of its own.
        const newCodes: string[] = [];
        for (let code = 0; code < 10; code++) {
          const issued = await rest(server.baseUrl, "POST", codesPath(held.entitlementId), {
            useEntitlementMaxActivations: true,
          });
          newCodes.push(issued.body.activationCode);
        }
        const lock = await lockEntitlementElsewhere(server, held.entitlementId);
        const heldRequests = counted([
          ...tokens.map((token) => () => sessionCall(server.baseUrl, token, "release")),
          ...newCodes.map((activationCode) => () => activate(server.baseUrl, { activationCode, fingerprint: "lone" })),
        ]);
        try {
          const freeAnswers = await unlessStalled(race(server, freshDevices(free.code, 30)));
          t.not(freeAnswers, "stalled", "the other entitlement's activations answered while the lock was held");
          t.is(heldRequests.answered(), 0, "the locked entitlement's requests waited for its lock");
          if (freeAnswers !== "stalled") t.deepEqual(tally(freeAnswers), { 200: 30 });
        } finally {
          await lock.release();
        }
        t.deepEqual(tally(await heldRequests.all), { 200: 30 });
        t.is(await liveSessions(server, held.entitlementId), 1, "every session released; the lone device's last one");
      },
    );
  }

  test.serial(`${database}: an entitlement whose group fails answers its own activations only`, async (t) => {
    const server = t.context.servers[database];
    const healthy = await entitlementWithCode(server.baseUrl, FLOATING(0));
    const broken = await entitlementWithCode(server.baseUrl, FLOATING(0));
    for (const { code } of [healthy, broken]) {
      t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    }
    // A policy this build cannot read (as a newer instance might write it during an upgrade).
    await server.app.dataSource.query("UPDATE entitlements SET activation_policy = ? WHERE id = ?", [
      '{"notAPolicyField": true}',
      broken.entitlementId,
    ]);
    const answers = await race(
      server,
      Array.from({ length: 40 }, (_, index) => ({
        activationCode: [healthy, broken][index % 2].code,
        fingerprint: `device-${index}`,
      })),
    );
    t.deepEqual(tally(answers.filter((_, index) => index % 2 === 0)), { 200: 20 });
    t.false(
      answers.some((answer, index) => index % 2 === 1 && answer.status === 200),
      "the unreadable policy refuses its own activations",
    );
    t.is(await liveSessions(server, healthy.entitlementId), 21);
  });

  test.serial(
    `${database}: racing activations of one code take its floating seats exactly, each counted once`,
    async (t) => {
      const server = t.context.servers[database];
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(7));
      t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
      const answers = await race(server, freshDevices(code, 60));
      t.deepEqual(tally(answers), { 200: 6, 409: 54 });
      t.true(refusedAs(answers, "seat-limit-reached"));
      const licenses = answers
        .filter((answer) => answer.status === 200)
        .map((answer) => licenseClaimsOf(answer.body.licenseToken));
      t.is(new Set(licenses.map((claims) => claims.sid)).size, 6, "each activation has a session of its own");
      t.true(
        licenses.every((claims) => JSON.stringify(claims).includes("export")),
        "each license names the features",
      );
      const [listed] = await codesOf(server, entitlementId);
      t.is(listed.activationCodeUseCount, 7);
      t.is(listed.registeredFingerprints.length, 7, "each device activated is recorded once");
      t.is(await liveSessions(server, entitlementId), 7);
    },
  );

  test.serial(
    `${database}: racing activations over two codes share the entitlement's floating seats exactly`,
    async (t) => {
      const server = t.context.servers[database];
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(10));
      const second = await rest(server.baseUrl, "POST", codesPath(entitlementId), {
        useEntitlementMaxActivations: true,
      });
      const codes = [code, second.body.activationCode as string];
      for (const activationCode of codes) {
        t.is((await activate(server.baseUrl, { activationCode, fingerprint: `first-${activationCode}` })).status, 200);
      }
      const answers = await race(
        server,
        Array.from({ length: 60 }, (_, index) => ({
          activationCode: codes[index % 2],
          fingerprint: `device-${index}`,
        })),
      );
      t.deepEqual(tally(answers), { 200: 8, 409: 52 });
      const uses = (await codesOf(server, entitlementId)).map((listed) => listed.activationCodeUseCount);
      t.is(uses[0] + uses[1], 10);
      t.is(await liveSessions(server, entitlementId), 10);
    },
  );

  test.serial(`${database}: an activation refused in a race answers its own error and takes nothing`, async (t) => {
    const server = t.context.servers[database];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(20));
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    const answers = await race(
      server,
      Array.from({ length: 30 }, (_, index) => ({
        activationCode: code,
        fingerprint: `device-${index}`,
        ...(index % 2 === 0 ? { requestedLeaseDuration: "0s" } : {}),
      })),
    );
    t.deepEqual(tally(answers), { 200: 15, 400: 15 });
    t.true(answers.every((answer, index) => (index % 2 === 0) === (answer.status === 400)));
    t.is(await liveSessions(server, entitlementId), 16);
    const [listed] = await codesOf(server, entitlementId);
    t.is(listed.activationCodeUseCount, 16);
  });

  test.serial(`${database}: a code's use limit holds under racing activations, re-activations counted`, async (t) => {
    const server = t.context.servers[database];
    const limited = { useEntitlementMaxActivations: true, maxActivationCodeUseCount: 9 };
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(0), limited);
    for (let use = 1; use <= 2; use++) {
      t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    }
    const answers = await race(server, freshDevices(code, 40));
    t.deepEqual(tally(answers), { 200: 7, 409: 33 });
    t.true(refusedAs(answers, "code-use-limit-reached"));
    const again = await activate(server.baseUrl, { activationCode: code, fingerprint: "first" });
    t.is(again.status, 409, "a device already activated is refused too once the uses are spent");
    t.is(again.body.type, "urn:provision:problem:code-use-limit-reached");
    const [listed] = await codesOf(server, entitlementId);
    t.like(listed, { activationCodeUseCount: 9, maxActivationCodeUseCount: 9 });
    t.is(await liveSessions(server, entitlementId), 8, "the first device's second session and seven others");
  });

  test.serial(`${database}: one device racing itself on a floating seat keeps one session`, async (t) => {
    const server = t.context.servers[database];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(1));
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    const live = await rest(server.baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true`);
    const firstSession = live.body.items[0].id as string;
    await rest(server.baseUrl, "DELETE", `${ENTITLEMENTS}/${entitlementId}/sessions/${firstSession}`);
    const answers = await race(
      server,
      Array.from({ length: 30 }, () => ({ activationCode: code, fingerprint: "one-device" })),
    );
    t.deepEqual(tally(answers), { 200: 30 });
    t.is(await liveSessions(server, entitlementId), 1, "each activation ended the device's session before it");
  });

  test.serial(
    `${database}: racing activations take exactly the node-locked seats, each device counted once`,
    async (t) => {
      const server = t.context.servers[database];
      const policy = { claimBasedActivation: { numberOfSeats: 10, isFloatingLicense: false } };
      const { entitlementId, code } = await entitlementWithCode(server.baseUrl, policy);
      t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
      const answers = await race(server, freshDevices(code, 40));
      t.deepEqual(tally(answers), { 200: 9, 409: 31 });
      t.true(refusedAs(answers, "seat-limit-reached"));
      t.is(await liveSessions(server, entitlementId), 10);
      const holders = answers.flatMap((answer, index) => (answer.status === 200 ? [`device-${index}`] : []));
      const again = await race(
        server,
        [...holders, "first"].map((fingerprint) => ({ activationCode: code, fingerprint })),
      );
      t.deepEqual(tally(again), { 200: 10 }, "a device holding a seat activates again without another");
      t.is(await liveSessions(server, entitlementId), 10);
    },
  );

  test.serial(`${database}: racing activations stop exactly at a code's own device limit`, async (t) => {
    const server = t.context.servers[database];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(0), { maxDeviceActivations: 5 });
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    const answers = await race(server, freshDevices(code, 30));
    t.deepEqual(tally(answers), { 200: 4, 409: 26 });
    t.true(refusedAs(answers, "device-limit-reached"));
    const [listed] = await codesOf(server, entitlementId);
    t.is(listed.registeredFingerprints.length, 5);
    t.is(listed.activationCodeUseCount, 5);
  });

  test.serial(`${database}: each activation of a group writes its own Entitlement.Activated event`, async (t) => {
    const server = t.context.servers[database];
    const { entitlementId, code } = await entitlementWithCode(server.baseUrl, FLOATING(0));
    t.is((await activate(server.baseUrl, { activationCode: code, fingerprint: "first" })).status, 200);
    await insertSubscription(server, { state: SubscriptionState.ACTIVE });
    const answers = await race(server, freshDevices(code, 30));
    t.deepEqual(tally(answers), { 200: 30 });
    const rows = (await server.app.dataSource.query(
      "SELECT payload FROM webhook_events WHERE type = 'Entitlement.Activated' AND entity_id = ?",
      [entitlementId],
    )) as { payload: string }[];
    const fingerprints = rows.map((row) => JSON.parse(row.payload).data.fingerprint as string).sort();
    const expected = Array.from({ length: 30 }, (_, index) => `device-${index}`).sort();
    t.deepEqual(fingerprints, expected, "one event per activation, none for the one before the subscription");
  });
}
