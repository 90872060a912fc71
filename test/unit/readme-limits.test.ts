import fs from "node:fs";
import test from "ava";
import { requestItemCaps } from "../../src/server/request-limits.js";
import { ALL_SERVICES } from "../../src/services.js";

test("the README's table of request limits lists every cap of the contract, as declared", (t) => {
  const readme = fs.readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const section = readme.split("### Request limits")[1]?.split("\n### ")[0] ?? "";
  const documented = [...section.matchAll(/^\| (\w+) \| `(\w+)` \| (\d+) \|$/gm)].map(
    ([, message, field, cap]) => `${message}.${field} ${cap}`,
  );
  const declared = requestItemCaps(ALL_SERVICES).map(
    (cap) => `${cap.message.replace("provision.v1.", "")}.${cap.field} ${cap.maxItems}`,
  );
  t.deepEqual(documented.sort(), declared.sort());
});
