import test from "ava";
import { EntitlementProductCache, productsReadOrKept } from "../../src/licensing/entitlement-product-cache.js";

test("kept ids are answered unless the rules are applied and the policy last read wanted the codes", (t) => {
  const cache = new EntitlementProductCache();
  t.is(cache.keptIds("e1", false), undefined, "nothing kept yet");
  cache.remember("e1", ["p1", "p2"], false);
  t.deepEqual(cache.keptIds("e1", false), ["p1", "p2"], "renew");
  t.deepEqual(cache.keptIds("e1", true), ["p1", "p2"], "activation, no product-code rule");
  cache.remember("e1", ["p1", "p2"], true);
  t.deepEqual(cache.keptIds("e1", false), ["p1", "p2"], "renew never needs the codes");
  t.is(cache.keptIds("e1", true), undefined, "activation under the product-code rule reads them");
});

test("an entitlement remembered again moves to the back of the eviction order", (t) => {
  const cache = new EntitlementProductCache();
  cache.remember("busy", ["p"], false);
  for (let index = 0; index < 19_999; index++) cache.remember(`other-${index}`, ["p"], false);
  cache.remember("busy", ["p"], false);
  cache.remember("one-more", ["p"], false);
  t.deepEqual(cache.keptIds("busy", false), ["p"], "the busy one stays");
  t.is(cache.keptIds("other-0", false), undefined, "the oldest other one went");
});

test("products come as read, else from the ids taken before the read, and never from neither", (t) => {
  const read = { ids: ["p1"], current: [{ id: "p1", productCode: "A", productVersion: "1" }] };
  t.is(productsReadOrKept(read, undefined), read);
  t.deepEqual(productsReadOrKept(undefined, ["p1"]), { ids: ["p1"], current: null });
  t.throws(() => productsReadOrKept(undefined, undefined), { message: /neither read nor kept/ });
});
