import test from "ava";
import { anyCovers, covers, isValidScope, parseScopeList } from "../../src/auth/scopes.js";

test("a scope of the catalog, an area wildcard, a verb wildcard and the full wildcard are valid", (t) => {
  for (const scope of ["catalog:read", "entitlements:write", "clients:delete", "catalog:*", "*:read", "*:*", "*"]) {
    t.true(isValidScope(scope), scope);
  }
});

test("a scope without a verb, of an unknown area or verb, with a third part, or empty is invalid", (t) => {
  for (const scope of ["catalog", "foo:read", "catalog:list", "catalog:read:x", "catalog:", ":read", "", "**"]) {
    t.false(isValidScope(scope), JSON.stringify(scope));
  }
});

test("a plain scope covers exactly itself", (t) => {
  t.true(covers("catalog:read", "catalog:read"));
  t.false(covers("catalog:read", "catalog:create"));
  t.false(covers("catalog:read", "entitlements:read"));
});

test("an area wildcard covers every verb of its area and nothing of another", (t) => {
  for (const verb of ["read", "create", "update", "write", "delete"]) t.true(covers("catalog:*", `catalog:${verb}`));
  t.false(covers("catalog:*", "entitlements:read"));
});

test("a verb wildcard covers its verb in every area and no other verb", (t) => {
  t.true(covers("*:read", "catalog:read"));
  t.true(covers("*:read", "webhooks:read"));
  t.false(covers("*:read", "catalog:create"));
});

test("the full wildcard covers every scope, wildcards included", (t) => {
  for (const scope of ["catalog:read", "clients:delete", "catalog:*", "*:read", "*"]) t.true(covers("*", scope));
});

test("write covers create and update but not read or delete", (t) => {
  t.true(covers("catalog:write", "catalog:create"));
  t.true(covers("catalog:write", "catalog:update"));
  t.true(covers("catalog:write", "catalog:write"));
  t.false(covers("catalog:write", "catalog:read"));
  t.false(covers("catalog:write", "catalog:delete"));
  t.true(covers("*:write", "entitlements:create"));
});

test("create and update do not cover write", (t) => {
  t.false(covers("catalog:create", "catalog:write"));
  t.false(covers("catalog:update", "catalog:write"));
});

test("a wanted wildcard is covered only by an equal or wider grant", (t) => {
  t.true(covers("catalog:*", "catalog:*"));
  t.true(covers("*:*", "catalog:*"));
  t.true(covers("*:read", "*:read"));
  t.false(covers("catalog:read", "catalog:*"));
  t.false(covers("catalog:*", "*:read"));
  t.false(covers("*:read", "catalog:*"));
  t.false(covers("*:read", "*:*"));
  t.false(covers("catalog:*", "*"));
  t.false(covers("*:read", "*"));
});

test("a grant of every area and every verb covers the full wildcard", (t) => {
  t.true(covers("*:*", "*:*"));
  t.true(covers("*:*", "*"));
});

test("any of several grants may cover a wanted scope", (t) => {
  t.true(anyCovers(["catalog:read", "entitlements:*"], "entitlements:delete"));
  t.true(anyCovers(["catalog:read", "entitlements:*"], "catalog:read"));
  t.false(anyCovers(["catalog:read", "entitlements:*"], "catalog:update"));
  t.false(anyCovers([], "catalog:read"));
});

test("a scope list splits on spaces and commas, drops empty entries and repeats, and keeps the order", (t) => {
  t.deepEqual(parseScopeList(" catalog:read  entitlements:*,catalog:read,\t*:read\n"), [
    "catalog:read",
    "entitlements:*",
    "*:read",
  ]);
  t.deepEqual(parseScopeList(""), []);
  t.deepEqual(parseScopeList(" , "), []);
});
