import test from "ava";
import { CLIENT_STATE_MAX_AGE_MS, type ClientState, ClientStates } from "../../src/auth/client-states.js";
import { VerifiedTokenCache } from "../../src/auth/verified-token-cache.js";
import { type InvalidationBus, MemoryInvalidationBus } from "../../src/platform/invalidation-bus.js";
import { manualClock } from "../support/manual-clock.js";

const CLAIMS = { clientId: "c1", providerId: "p1", scopes: ["catalog:read"], generation: "g1" };

test("a verified token is remembered until the instant it stops being accepted", (t) => {
  const cache = new VerifiedTokenCache();
  cache.set("token-a", CLAIMS, 10_000, 0);
  t.deepEqual(cache.get("token-a", 10_000), CLAIMS);
  t.is(cache.get("token-a", 10_001), undefined);
  t.is(cache.get("token-a", 5_000), undefined, "an expired entry is dropped, not kept for an earlier clock");
  t.is(cache.get("token-b", 0), undefined);
});

test("the verified-token cache forgets the least recently used token past its capacity", (t) => {
  const cache = new VerifiedTokenCache(2);
  cache.set("a", CLAIMS, 1e12, 0);
  cache.set("b", CLAIMS, 1e12, 0);
  cache.get("a", 2000);
  cache.set("c", CLAIMS, 1e12, 2000);
  t.is(cache.size, 2);
  t.truthy(cache.get("a", 2000));
  t.is(cache.get("b", 2000), undefined);
  t.truthy(cache.get("c", 2000));
});

test("the verified-token cache's eviction order is least recently used to within a second", (t) => {
  const cache = new VerifiedTokenCache(2);
  cache.set("a", CLAIMS, 1e12, 0);
  cache.set("b", CLAIMS, 1e12, 0);
  cache.get("a", 500);
  cache.set("c", CLAIMS, 1e12, 500);
  t.is(cache.get("a", 500), undefined, "used again within a second of being stored, it kept its place");
  t.truthy(cache.get("b", 500));
});

test("verified tokens whose signatures differ only before their last 22 characters are told apart", (t) => {
  const cache = new VerifiedTokenCache(10);
  const tail = "x".repeat(22);
  cache.set(`h.p.AAAA${tail}`, CLAIMS, 1e12, 0);
  t.is(cache.get(`h.p.BBBB${tail}`, 0), undefined, "found by the same key, compared whole");
  t.truthy(cache.get(`h.p.AAAA${tail}`, 0));
});

function countingLoader(states: Map<string, ClientState>) {
  const loads: string[] = [];
  return {
    loads,
    load: async (clientId: string) => {
      loads.push(clientId);
      return states.get(clientId) ?? null;
    },
  };
}

const ROW: ClientState = { clientId: "c1", providerId: "p1", disabled: false, tokenGeneration: "g1" };

test("client states are read once, then from memory until a change is published", async (t) => {
  const rows = new Map([["c1", ROW]]);
  const { loads, load } = countingLoader(rows);
  const bus = new MemoryInvalidationBus();
  const clients = await ClientStates.create(load, bus, manualClock());
  await clients.get("c1");
  await clients.get("c1");
  t.is(loads.length, 1);
  rows.set("c1", { ...ROW, tokenGeneration: "g2" });
  await bus.publish("client-changed", "c1");
  t.is((await clients.get("c1"))?.tokenGeneration, "g2");
  t.is(loads.length, 2);
});

test("a load that raced an invalidation is not remembered", async (t) => {
  let release: (state: ClientState) => void = () => undefined;
  let loads = 0;
  const bus = new MemoryInvalidationBus();
  const clients = await ClientStates.create(
    () => {
      loads++;
      return loads === 1 ? new Promise((resolve) => (release = resolve)) : Promise.resolve(ROW);
    },
    bus,
    manualClock(),
  );
  const stale = clients.get("c1");
  await bus.publish("client-changed", "c1");
  release({ ...ROW, tokenGeneration: "old" });
  t.is((await stale)?.tokenGeneration, "old");
  t.is((await clients.get("c1"))?.tokenGeneration, "g1", "the next read goes to the database");
  t.is(loads, 2);
});

test("client states are read again after their maximum age, and always while the bus is not listening", async (t) => {
  const { loads, load } = countingLoader(new Map([["c1", ROW]]));
  const clock = manualClock();
  const clients = await ClientStates.create(load, new MemoryInvalidationBus(), clock);
  await clients.get("c1");
  clock.advance(CLIENT_STATE_MAX_AGE_MS);
  await clients.get("c1");
  t.is(loads.length, 2);

  const deaf: InvalidationBus = {
    listening: false,
    publish: async () => undefined,
    subscribe: async () => undefined,
    close: async () => undefined,
  };
  const uncached = countingLoader(new Map([["c1", ROW]]));
  const withoutBus = await ClientStates.create(uncached.load, deaf, clock);
  await withoutBus.get("c1");
  await withoutBus.get("c1");
  t.is(uncached.loads.length, 2);
});
