import { Writable } from "node:stream";
import { create } from "@bufbuild/protobuf";
import test from "ava";
import { type Product, ProductSchema } from "../../gen/provision/v1/catalog_pb.js";
import { PRODUCT_CHANGED_CHANNEL, PRODUCT_MAX_AGE_MS, ProductCache } from "../../src/catalog/product-cache.js";
import { InvalidatedCache } from "../../src/platform/invalidated-cache.js";
import type { InvalidationBus } from "../../src/platform/invalidation-bus.js";
import { createLogger } from "../../src/platform/logger.js";
import { manualClock } from "../support/manual-clock.js";

/** A bus whose listening state, resets and publish failures a test controls; it records what is published. */
function controlledBus() {
  const handlers: { channel: string; onMessage: (message: string) => void; onReset: () => void }[] = [];
  const bus = {
    listening: true,
    failing: false,
    published: [] as [string, string][],
    async publish(channel: string, message: string) {
      if (bus.failing) throw new Error("redis did not answer within 1000 ms");
      bus.published.push([channel, message]);
      for (const handler of handlers) if (handler.channel === channel) handler.onMessage(message);
    },
    async subscribe(channel: string, onMessage: (message: string) => void, onReset: () => void) {
      handlers.push({ channel, onMessage, onReset });
    },
    async close() {},
    reset() {
      for (const handler of handlers) handler.onReset();
    },
  };
  return bus satisfies InvalidationBus;
}

function countingLoads() {
  const loads: string[] = [];
  return {
    loads,
    load: (key: string) => async () => {
      loads.push(key);
      return `value of ${key}`;
    },
  };
}

async function cacheOf(bus: InvalidationBus, capacity = 10) {
  return InvalidatedCache.create<string>({ channel: "things", bus, clock: manualClock(), capacity, maxAgeMs: 1000 });
}

test("past its capacity the cache forgets the least recently used entry", async (t) => {
  const clock = manualClock();
  const cache = await InvalidatedCache.create<string>({
    channel: "things",
    bus: controlledBus(),
    clock,
    capacity: 2,
    maxAgeMs: 60_000,
  });
  const { loads, load } = countingLoads();
  await cache.get("a", load("a"));
  await cache.get("b", load("b"));
  clock.advance(1001);
  await cache.get("a", load("a"));
  await cache.get("c", load("c"));
  t.is(cache.size, 2);
  await cache.get("a", load("a"));
  await cache.get("b", load("b"));
  t.deepEqual(loads, ["a", "b", "c", "b"]);
});

test("an entry used again within a second of its last use keeps its place in the eviction order", async (t) => {
  const cache = await cacheOf(controlledBus(), 2);
  const { loads, load } = countingLoads();
  await cache.get("a", load("a"));
  await cache.get("b", load("b"));
  await cache.get("a", load("a"));
  await cache.get("c", load("c"));
  await cache.get("b", load("b"));
  await cache.get("a", load("a"));
  t.deepEqual(loads, ["a", "b", "c", "a"], "a, stored first and not moved since, made room for c");
});

test("past its weight the cache forgets the least recently used entries, and keeps no value heavier alone", async (t) => {
  const clock = manualClock();
  const cache = await InvalidatedCache.create<string>({
    channel: "things",
    bus: controlledBus(),
    clock,
    capacity: 10,
    maxWeight: 5,
    weigh: (value) => value.length,
    maxAgeMs: 60_000,
  });
  const loads: string[] = [];
  const load = (value: string) => async () => {
    loads.push(value);
    return value;
  };
  await cache.get("a", load("aa"));
  await cache.get("b", load("bb"));
  clock.advance(1001);
  await cache.get("a", load("aa"));
  await cache.get("c", load("ccc"));
  t.is(cache.size, 2, "b, the least recently used, made room for c");
  await cache.get("d", load("dddddd"));
  await cache.get("d", load("dddddd"));
  for (const [key, value] of [
    ["a", "aa"],
    ["c", "ccc"],
    ["b", "bb"],
  ]) {
    await cache.get(key, load(value));
  }
  t.deepEqual(loads, ["aa", "bb", "ccc", "dddddd", "dddddd", "bb"]);
});

test("a value the cache may not keep is loaded every time", async (t) => {
  const bus = controlledBus();
  const cache = await InvalidatedCache.create<string | null>({
    channel: "things",
    bus,
    clock: manualClock(),
    capacity: 10,
    maxAgeMs: 1000,
    keeps: (value) => value !== null,
  });
  let loads = 0;
  const missing = async () => {
    loads++;
    return null;
  };
  t.is(await cache.get("gone", missing), null);
  t.is(await cache.get("gone", missing), null);
  t.is(loads, 2);
});

test("a reset of the bus drops every entry, and nothing is kept while the bus is not listening", async (t) => {
  const bus = controlledBus();
  const cache = await cacheOf(bus);
  const { loads, load } = countingLoads();
  await cache.get("a", load("a"));
  await cache.get("b", load("b"));
  bus.reset();
  t.is(cache.size, 0);
  bus.listening = false;
  await cache.get("a", load("a"));
  await cache.get("a", load("a"));
  t.is(cache.size, 0);
  t.deepEqual(loads, ["a", "b", "a", "a"]);
});

test("a change drops the keys here and publishes each of them on the channel", async (t) => {
  const bus = controlledBus();
  const cache = await cacheOf(bus);
  const { loads, load } = countingLoads();
  for (const key of ["a", "b", "c"]) await cache.get(key, load(key));
  await cache.changed("a", "b");
  t.deepEqual(bus.published, [
    ["things", "a"],
    ["things", "b"],
  ]);
  for (const key of ["a", "b", "c"]) await cache.get(key, load(key));
  t.deepEqual(loads, ["a", "b", "c", "a", "b"]);
});

function productOf(name: string): Product {
  return create(ProductSchema, { id: "p", name, features: [{ featureCode: "f" }] });
}

test("a remembered product is frozen, so no caller can change what later callers get", async (t) => {
  const products = await ProductCache.create(controlledBus(), manualClock(), createLogger("silent"));
  const product = await products.get("provider", "p", async () => productOf("original"));
  t.true(Object.isFrozen(product));
  t.throws(() => {
    (product as Product).name = "changed";
  });
  t.throws(() => {
    (product as Product).features[0].featureCode = "changed";
  });
  t.throws(() => (product as Product).features.push(productOf("x").features[0]));
  t.is((await products.get("provider", "p", async () => productOf("reloaded")))?.name, "original");
});

test("products are remembered per provider, expire, and a change is told as provider/product", async (t) => {
  const bus = controlledBus();
  const clock = manualClock();
  const products = await ProductCache.create(bus, clock, createLogger("silent"));
  await products.get("provider-a", "p", async () => productOf("of a"));
  t.is((await products.get("provider-b", "p", async () => null)) ?? undefined, undefined);
  t.is((await products.get("provider-a", "p", async () => productOf("reloaded")))?.name, "of a");
  await products.changed("provider-a", ["p"]);
  t.deepEqual(bus.published, [[PRODUCT_CHANGED_CHANNEL, "provider-a/p"]]);
  t.is((await products.get("provider-a", "p", async () => productOf("changed")))?.name, "changed");
  clock.advance(PRODUCT_MAX_AGE_MS);
  t.is((await products.get("provider-a", "p", async () => productOf("expired")))?.name, "expired");
});

test("a change other instances cannot be told of is logged, and still dropped here", async (t) => {
  const bus = controlledBus();
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(String(chunk));
      callback();
    },
  });
  const products = await ProductCache.create(bus, manualClock(), createLogger("info", sink));
  await products.get("provider", "p", async () => productOf("original"));
  bus.failing = true;
  await products.changed("provider", ["p"]);
  t.true(lines.some((line) => line.includes("could not tell other instances of a product change")));
  t.is((await products.get("provider", "p", async () => productOf("changed")))?.name, "changed");
});

test("callers missing one key at once share one load, and a change of that key alone makes it stale", async (t) => {
  const cache = await cacheOf(controlledBus());
  let release: (value: string) => void = () => undefined;
  let loads = 0;
  const slow = () => {
    loads++;
    return new Promise<string>((resolve) => {
      release = resolve;
    });
  };
  const [first, second] = [cache.get("a", slow), cache.get("a", slow)];
  const other = cache.get("b", async () => "b loaded");
  await cache.changed("b");
  release("a loaded");
  t.deepEqual(await Promise.all([first, second]), ["a loaded", "a loaded"]);
  t.is(loads, 1, "one load for both callers");
  t.is(await other, "b loaded");
  t.is(await cache.get("a", async () => "loaded again"), "a loaded", "a change of another key left it kept");

  const racing = cache.get("c", slow);
  await cache.changed("c");
  const after = cache.get("c", async () => "c after the change");
  release("c before the change");
  t.is(await racing, "c before the change");
  t.is(await after, "c after the change", "a caller after the change does not join the stale load");
  t.is(await cache.get("c", async () => "c loaded later"), "c after the change");
});

test("peek answers only what get would serve without loading, and never loads", async (t) => {
  const clock = manualClock();
  const bus = controlledBus();
  const cache = await InvalidatedCache.create<string>({ channel: "things", bus, clock, capacity: 10, maxAgeMs: 1000 });
  const { loads, load } = countingLoads();
  t.is(cache.peek("a"), undefined);
  await cache.get("a", load("a"));
  t.is(cache.peek("a"), "value of a");
  await cache.changed("a");
  t.is(cache.peek("a"), undefined);
  await cache.get("a", load("a"));
  bus.listening = false;
  t.is(cache.peek("a"), undefined, "nothing is served while the bus is not listening");
  bus.listening = true;
  clock.advance(1000);
  t.is(cache.peek("a"), undefined, "nothing is served past its maximum age");
  t.deepEqual(loads, ["a", "a"]);
});
