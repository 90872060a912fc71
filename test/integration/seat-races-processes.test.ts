import { randomBytes } from "node:crypto";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import mysql from "mysql2/promise";
import { accessToken } from "../support/auth.js";
import { activate, ENTITLEMENTS, entitlementWithCode, sessionIdOf } from "../support/licensing.js";
import { pollUntil } from "../support/poll.js";
import { type ProvisionProcess, spawnProvision } from "../support/provision-process.js";
import { type OwnRedis, startOwnRedis } from "../support/redis-server.js";
import { defaultAuthorization, PRODUCTS, rest } from "../support/rest.js";
import { createTestDatabase } from "../support/test-server.js";

// Three compiled service processes on one MySQL database and a Redis of this file's own (wiped and restarted
// here), each with its own pools and caches: seats are counted under the entitlement's row lock in MySQL.
interface Instance {
  process: ProvisionProcess;
  baseUrl: string;
}

interface Context {
  redis: OwnRedis;
  database: { url: string; drop(): Promise<void> };
  instances: Instance[];
}

const test = anyTest as TestFn<Context>;
const ACTIVATIONS = 200;
const SEATS = 10;
const SEAT_KINDS = [
  { kind: "floating", floating: true },
  { kind: "node-locked", floating: false },
];

test.before(async (t) => {
  t.timeout(60_000);
  t.context.instances = [];
  t.context.redis = await startOwnRedis();
  t.context.database = await createTestDatabase();
  const admin = { id: `race-admin-${randomBytes(6).toString("hex")}`, secret: randomBytes(32).toString("base64url") };
  const env = {
    DATABASE_URL: t.context.database.url,
    REDIS_URL: t.context.redis.url,
    LOG_LEVEL: "info",
    PROVISION_BOOTSTRAP_CLIENT_ID: admin.id,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: admin.secret,
    TOKEN_RATE_LIMIT_PER_ADDRESS: "100000",
    ACTIVATION_RATE_LIMIT_PER_ADDRESS: "100000",
  };
  // The first runs the migrations alone; the other two start on the migrated database.
  t.context.instances.push(await startInstance(env));
  t.context.instances.push(...(await Promise.all([startInstance(env), startInstance(env)])));
  const authorization = `Bearer ${await accessToken(t.context.instances[0].baseUrl, admin.id, admin.secret)}`;
  for (const { baseUrl } of t.context.instances) defaultAuthorization.set(baseUrl, authorization);
});

test.after.always(async (t) => {
  for (const instance of t.context.instances ?? []) instance.process.kill();
  await t.context.redis?.stop();
  await t.context.database?.drop();
});

/** The compiled service on an ephemeral port of 127.0.0.1, once /healthz answers. */
async function startInstance(env: Record<string, string>): Promise<Instance> {
  const child = spawnProvision({ ...env, HOST: "127.0.0.1", PORT: "0" });
  try {
    const listening = await child.waitForLog((record) => record.msg === "provision is listening", 30_000);
    const baseUrl = `http://127.0.0.1:${listening.port}`;
    await pollUntil(`${baseUrl}/healthz`, async () => (await fetch(`${baseUrl}/healthz`)).status === 200 || undefined);
    return { process: child, baseUrl };
  } catch (error) {
    child.kill();
    throw error;
  }
}

/** What a client saw of one activation: its status, or "failed" when no answer came (the connection broke). */
interface Outcome {
  status: number | "failed";
  sessionId?: string;
  problem?: string;
}

interface Race {
  /** Resolves when the first activation is answered, while (normally) most are still in flight. */
  firstAnswer: Promise<void>;
  outcomes: Promise<Outcome[]>;
}

/** One activation per target base URL, all at once, each with a device of its own named `${devices}-<index>`. */
function startRace(targets: string[], code: string, devices: string): Race {
  let signalFirst = () => {};
  const firstAnswer = new Promise<void>((resolve) => {
    signalFirst = resolve;
  });
  const outcomes = targets.map((baseUrl, index) =>
    activate(baseUrl, { activationCode: code, fingerprint: `${devices}-${index}` })
      .then(
        (answer): Outcome => ({
          status: answer.status,
          sessionId: answer.status === 200 ? sessionIdOf(answer.body.licenseToken) : undefined,
          problem: answer.body?.type,
        }),
        (): Outcome => ({ status: "failed" }),
      )
      .finally(() => signalFirst()),
  );
  return { firstAnswer, outcomes: Promise.all(outcomes) };
}

/**
 * Half the activations raced, `disrupt` done once the first of them is answered, then the other half raced: the
 * disruption falls inside the race however fast activations are (the first half may still be in flight, the
 * second is sent after it). Checking instead that some of one race were unanswered after the disruption failed
 * once activations got fast enough to finish during a Redis round trip on a loaded machine.
 */
async function raceAround(instances: Instance[], code: string, disrupt: () => Promise<void>): Promise<Outcome[]> {
  const targets = spread(instances, ACTIVATIONS);
  const before = startRace(targets.slice(0, ACTIVATIONS / 2), code, "before");
  await before.firstAnswer;
  await disrupt();
  const after = startRace(targets.slice(ACTIVATIONS / 2), code, "after");
  return [...(await before.outcomes), ...(await after.outcomes)];
}

/** `count` targets spread round-robin over the instances. */
function spread(instances: Instance[], count: number): string[] {
  return Array.from({ length: count }, (_, index) => instances[index % instances.length].baseUrl);
}

function tally(outcomes: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { status } of outcomes) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

function seen(outcomes: Outcome[]): string[] {
  return outcomes.flatMap((outcome) => (outcome.sessionId ? [outcome.sessionId] : []));
}

function refusals(outcomes: Outcome[]): Set<string | undefined> {
  return new Set(outcomes.filter((outcome) => outcome.status === 409).map((outcome) => outcome.problem));
}

async function liveSessionIds(baseUrl: string, entitlementId: string): Promise<string[]> {
  const live = await rest(baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/sessions?liveOnly=true&pageSize=100`);
  if (live.status !== 200) throw new Error(`sessions: ${live.status} ${JSON.stringify(live.body)}`);
  if (live.body.totalCount > 100) throw new Error(`${live.body.totalCount} live sessions: more than a page`);
  return live.body.items.map((item: { id: string }) => item.id);
}

function claimPolicy(floating: boolean) {
  return { claimBasedActivation: { numberOfSeats: SEATS, isFloatingLicense: floating } };
}

/** Exactly SEATS answered 200 and the rest 409 seat-limit-reached; the live sessions are the ones answered. */
async function assertExactSeats(t: ExecutionContext<Context>, entitlementId: string, outcomes: Outcome[]) {
  t.deepEqual(tally(outcomes), { 200: SEATS, 409: ACTIVATIONS - SEATS });
  t.deepEqual(refusals(outcomes), new Set(["urn:provision:problem:seat-limit-reached"]));
  const live = await liveSessionIds(t.context.instances[1].baseUrl, entitlementId);
  t.deepEqual(live.sort(), seen(outcomes).sort());
}

/** Every instance reports itself ready (Redis connected, its subscriptions standing). */
async function allReady(instances: Instance[]) {
  for (const { baseUrl } of instances) {
    await pollUntil(
      `${baseUrl} to be ready`,
      async () => (await fetch(`${baseUrl}/readyz`)).status === 200 || undefined,
      {
        timeoutMs: 10_000,
        intervalMs: 100,
      },
    );
  }
}

/**
 * Proves invalidations travel from one instance to another over Redis pub/sub: `to` serves a product from
 * memory (a change written behind its back does not show), then a rename through `from` shows on `to` within
 * a second, far sooner than the copy would expire on its own.
 */
async function invalidationTravels(t: ExecutionContext<Context>, from: Instance, to: Instance) {
  const created = await rest(from.baseUrl, "POST", PRODUCTS, { productCode: `INV-${randomBytes(6).toString("hex")}` });
  t.is(created.status, 200);
  const path = `${PRODUCTS}/${created.body.id}`;
  const database = await mysql.createConnection({ uri: t.context.database.url });
  try {
    let marker = 0;
    await pollUntil(
      `${to.baseUrl} to answer the product from memory`,
      async () => {
        const before = (await rest(to.baseUrl, "GET", path)).body.description;
        await database.query("UPDATE products SET description = ? WHERE id = ?", [
          `behind ${++marker}`,
          created.body.id,
        ]);
        return (await rest(to.baseUrl, "GET", path)).body.description === before || undefined;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
  } finally {
    await database.end();
  }
  t.is((await rest(from.baseUrl, "PUT", path, { name: "renamed" })).status, 200);
  await pollUntil(
    `${to.baseUrl} to answer the renamed product`,
    async () => (await rest(to.baseUrl, "GET", path)).body.name === "renamed" || undefined,
    { timeoutMs: 1000, intervalMs: 20 },
  );
}

for (const { kind, floating } of SEAT_KINDS) {
  test.serial(`${ACTIVATIONS} racing activations on three processes take exactly ${SEATS} ${kind} seats`, async (t) => {
    const { instances } = t.context;
    const { entitlementId, code } = await entitlementWithCode(instances[0].baseUrl, claimPolicy(floating));
    const race = startRace(spread(instances, ACTIVATIONS), code, "device");
    await assertExactSeats(t, entitlementId, await race.outcomes);
  });
}

test.serial(
  `${ACTIVATIONS} racing activations over four entitlements on three processes: each one's seats exact`,
  async (t) => {
    const { instances } = t.context;
    const raced = await Promise.all(
      [true, false, true, false].map((floating) => entitlementWithCode(instances[0].baseUrl, claimPolicy(floating))),
    );
    // Each code's first activation on each process runs alone (its seat plan is learnt); the rest go in groups
    // whose entitlements overlap across the processes.
    for (const [index, { code }] of raced.entries()) {
      for (const { baseUrl } of instances) {
        t.is((await activate(baseUrl, { activationCode: code, fingerprint: `warm-${index}-${baseUrl}` })).status, 200);
      }
    }
    const targets = spread(instances, ACTIVATIONS);
    const outcomes = await Promise.all(
      targets.map((baseUrl, index) =>
        activate(baseUrl, { activationCode: raced[index % raced.length].code, fingerprint: `mixed-${index}` }).then(
          (answer) => answer.status,
        ),
      ),
    );
    const free = SEATS - instances.length;
    for (const [which, { entitlementId }] of raced.entries()) {
      const mine = outcomes.filter((_, index) => index % raced.length === which);
      t.deepEqual(
        tally(mine.map((status) => ({ status }))),
        { 200: free, 409: mine.length - free },
        `entitlement ${which}`,
      );
      t.is((await liveSessionIds(instances[2].baseUrl, entitlementId)).length, SEATS, `entitlement ${which}`);
    }
  },
);

test.serial(
  `floating seats whose grace ran out are taken back exactly once by ${ACTIVATIONS} racing activations`,
  async (t) => {
    const { instances } = t.context;
    const policy = { claimBasedActivation: { ...claimPolicy(true).claimBasedActivation, gracePeriod: "00:00:00" } };
    const { entitlementId, code } = await entitlementWithCode(instances[0].baseUrl, policy);
    // Every seat taken for one second, on all three processes; then nobody renews.
    for (const [index, baseUrl] of spread(instances, SEATS).entries()) {
      const brief = await activate(baseUrl, {
        activationCode: code,
        fingerprint: `brief-${index}`,
        requestedLeaseDuration: "1s",
      });
      t.is(brief.status, 200, JSON.stringify(brief.body));
    }
    t.is((await activate(instances[0].baseUrl, { activationCode: code, fingerprint: "one-more" })).status, 409);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const outcomes = await startRace(spread(instances, ACTIVATIONS), code, "after-lapse").outcomes;
    await assertExactSeats(t, entitlementId, outcomes);
    const database = await mysql.createConnection({ uri: t.context.database.url });
    try {
      const [counted] = await database.query("SELECT held FROM floating_seat_counts WHERE entitlement_id = ?", [
        entitlementId,
      ]);
      const [holding] = await database.query(
        "SELECT COUNT(*) AS n FROM license_sessions WHERE entitlement_id = ? AND holds_floating_seat = 1",
        [entitlementId],
      );
      t.deepEqual([(counted as { held: number }[])[0].held, Number((holding as { n: number }[])[0].n)], [SEATS, SEATS]);
    } finally {
      await database.end();
    }
  },
);

for (const { kind, floating } of SEAT_KINDS) {
  test.serial(
    `Redis flushed mid-race: still exactly ${SEATS} ${kind} seats, and every process keeps answering`,
    async (t) => {
      const { instances, redis } = t.context;
      const { entitlementId, code } = await entitlementWithCode(instances[0].baseUrl, claimPolicy(floating));
      const outcomes = await raceAround(instances, code, () => redis.flushAll().then(() => undefined));
      await assertExactSeats(t, entitlementId, outcomes);
      await allReady(instances);
      await invalidationTravels(t, instances[0], instances[2]);
    },
  );
}

test.serial(
  `Redis restarted empty mid-race: still exactly ${SEATS} seats, and pub/sub comes back on every process`,
  async (t) => {
    const { instances, redis } = t.context;
    const { entitlementId, code } = await entitlementWithCode(instances[0].baseUrl, claimPolicy(true));
    const outcomes = await raceAround(instances, code, () => redis.restart());
    await assertExactSeats(t, entitlementId, outcomes);
    await allReady(instances);
    await invalidationTravels(t, instances[1], instances[0]);
    await invalidationTravels(t, instances[0], instances[2]);
  },
);

test.serial(
  `a process killed mid-activation leaks no seat: the survivors fill exactly ${SEATS}, floating and node-locked`,
  async (t) => {
    const { instances } = t.context;
    const [first, second, victim] = instances;
    // Most activations go to the process about to die, so that few seats are taken when it does.
    const targets = Array.from({ length: ACTIVATIONS }, (_, index) =>
      index % 40 === 0 ? [first, second][(index / 40) % 2].baseUrl : victim.baseUrl,
    );
    const raced = await Promise.all(
      SEAT_KINDS.map(async ({ kind, floating }) => {
        const { entitlementId, code } = await entitlementWithCode(first.baseUrl, claimPolicy(floating));
        return { kind, entitlementId, code };
      }),
    );
    const races = raced.map(({ code }) => startRace(targets, code, "raced"));
    await Promise.race(races.map((race) => race.firstAnswer));
    victim.process.kill();
    await victim.process.exited;

    for (const [index, { kind, entitlementId, code }] of raced.entries()) {
      const outcomes = await races[index].outcomes;
      const toVictim = outcomes.filter((_, at) => targets[at] === victim.baseUrl);
      const toSurvivors = outcomes.filter((_, at) => targets[at] !== victim.baseUrl);
      t.true(tally(toVictim).failed > 0, `${kind}: the kill cut activations in flight`);
      t.false("failed" in tally(toSurvivors), `${kind}: the survivors answered every activation`);
      const live = await liveSessionIds(first.baseUrl, entitlementId);
      t.true(live.length <= SEATS, `${kind}: ${live.length} live sessions`);
      // An activation cut by the kill may have committed unseen; every one a client saw has a live session.
      for (const sessionId of seen(outcomes)) t.true(live.includes(sessionId), `${kind}: ${sessionId}`);

      const fill = await startRace(spread([first, second], 50), code, "fill").outcomes;
      const free = SEATS - live.length;
      t.deepEqual(tally(fill), free > 0 ? { 200: free, 409: 50 - free } : { 409: 50 }, kind);
      const after = await liveSessionIds(second.baseUrl, entitlementId);
      t.deepEqual(after.sort(), [...live, ...seen(fill)].sort(), `${kind}: exactly the seats, no more`);
      t.is(after.length, SEATS, kind);
    }
  },
);
