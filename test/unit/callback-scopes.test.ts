import test from "ava";
import { checkCallbackScopes } from "../../src/webhooks/callback-scopes.js";

const everything = ["*"];

test("one area with read, create, update or write is accepted from a client holding it", (t) => {
  const accepted = [
    "catalog:read",
    "catalog:create",
    "catalog:update",
    "catalog:write",
    "entitlements:read",
    "entitlements:write",
    "reporting:read",
    "webhooks:update",
    "clients:read",
  ];
  for (const scope of accepted) t.deepEqual(checkCallbackScopes([scope], everything).violations, [], scope);
  t.deepEqual(checkCallbackScopes(accepted, everything), { scopes: accepted, violations: [] });
});

test("scopes outside the catalog, wildcards and delete are refused, each with its own reason", (t) => {
  const refused: [scope: string, reason: RegExp][] = [
    ["", /not in the scope catalog/],
    ["catalog", /not in the scope catalog/],
    ["catalog:list", /not in the scope catalog/],
    ["billing:read", /not in the scope catalog/],
    ["catalog:read:extra", /not in the scope catalog/],
    [" catalog:read", /not in the scope catalog/],
    ["Catalog:read", /not in the scope catalog/],
    ["*", /wildcard/],
    ["*:*", /wildcard/],
    ["*:read", /wildcard/],
    ["catalog:*", /wildcard/],
    ["catalog:delete", /verb must be one of read, create, update, write/],
    ["webhooks:delete", /verb must be one of read, create, update, write/],
    ["clients:delete", /verb must be one of read, create, update, write/],
  ];
  for (const [scope, reason] of refused) {
    const { violations } = checkCallbackScopes([scope], everything);
    t.is(violations.length, 1, JSON.stringify(scope));
    t.is(violations[0]?.field, "callbackScopes[0]");
    t.regex(violations[0]?.message ?? "", reason, JSON.stringify(scope));
  }
});

test("a scope must be covered by the caller's scopes, wildcards and write's create and update included", (t) => {
  const covered: [caller: string[], scope: string][] = [
    [["catalog:read"], "catalog:read"],
    [["catalog:*"], "catalog:update"],
    [["*:read"], "entitlements:read"],
    [["*:*"], "webhooks:create"],
    [["entitlements:write"], "entitlements:create"],
    [["entitlements:write"], "entitlements:update"],
    [["catalog:read", "entitlements:write"], "entitlements:write"],
  ];
  for (const [caller, scope] of covered) {
    t.deepEqual(checkCallbackScopes([scope], caller).violations, [], `${caller} → ${scope}`);
  }
  const beyond: [caller: string[], scope: string][] = [
    [[], "catalog:read"],
    [["catalog:read"], "catalog:create"],
    [["catalog:read"], "entitlements:read"],
    [["catalog:create", "catalog:update"], "catalog:write"],
    [["*:read"], "catalog:write"],
    [["entitlements:write"], "entitlements:read"],
  ];
  for (const [caller, scope] of beyond) {
    const { violations } = checkCallbackScopes([scope], caller);
    t.deepEqual(violations, [
      { field: "callbackScopes[0]", message: `${scope} is beyond the scopes of the calling client` },
    ]);
  }
});

test("a wildcard or delete is refused even from a client holding every scope", (t) => {
  const { violations } = checkCallbackScopes(["catalog:*", "catalog:delete"], ["*"]);
  t.deepEqual(
    violations.map((violation) => violation.field),
    ["callbackScopes[0]", "callbackScopes[1]"],
  );
});

test("each refused scope is named by its index in the request; the others pass", (t) => {
  const { violations } = checkCallbackScopes(
    ["catalog:read", "catalog:delete", "entitlements:read", "*", "webhooks:read"],
    ["catalog:*", "webhooks:*"],
  );
  t.deepEqual(
    violations.map((violation) => violation.field),
    ["callbackScopes[1]", "callbackScopes[2]", "callbackScopes[3]"],
  );
  t.regex(violations[1]?.message ?? "", /beyond/);
});

test("duplicates are removed, keeping the order of first request; no scopes is no violation", (t) => {
  t.deepEqual(checkCallbackScopes(["entitlements:read", "catalog:read", "entitlements:read"], everything), {
    scopes: ["entitlements:read", "catalog:read"],
    violations: [],
  });
  t.deepEqual(checkCallbackScopes([], everything), { scopes: [], violations: [] });
});
