import test from "ava";
import { setNewest } from "../../src/platform/bounded-map.js";

test("setNewest keeps the entries set most recently, a key set again counting as new", (t) => {
  const map = new Map<string, number>();
  for (const [index, key] of ["a", "b", "c", "d"].entries()) setNewest(map, key, index, 3);
  t.deepEqual([...map.keys()], ["b", "c", "d"], "the oldest is forgotten past the capacity");
  setNewest(map, "b", 10, 3);
  const entries = [...map].map(([key, value]) => `${key}=${value}`);
  t.deepEqual(entries, ["c=2", "d=3", "b=10"], "set again: its new value, behind the others");
  setNewest(map, "e", 4, 3);
  t.deepEqual([...map.keys()], ["d", "b", "e"]);
  setNewest(map, "f", 5, 1);
  t.deepEqual([...map.keys()], ["f"], "a smaller capacity forgets every older entry");
});
